import { readdirSync } from 'node:fs';
import { setPriority } from 'node:os';
import { checkPlan, compileInWorker } from './plan-compiler';
import type { CompilerAnswer } from './plan-worker';

/**
 * The plan compiler's process (plan-worker.ts starts one per compile, with a heap cap and a
 * deadline). A process of its own rather than a thread of the server's: V8 runs a thread's
 * collections and optimising compiles on helper threads shared by the whole process, which no
 * priority of the compiling thread reaches (they took 1.2 s of CPU per compile of a 625 KB
 * plan, at the server's priority). Here every thread is this compile's, and all of them run
 * below the server (on Linux a thread's nice value is its own, so each one is set).
 *
 * In: the plan's JSON text on stdin, and `--sources` when the server wants the validators'
 * code. Out, on stdout, one JSON line each: what the check found, then the compile's answer
 * (each definition's name and the number of its source), then (when the plan compiled) the
 * normalised plan's JSON text, which the server stores as is, and each distinct source.
 */
function lowerPriority(): void {
  let threads: number[];
  try {
    threads = readdirSync('/proc/self/task').map(Number);
  } catch {
    threads = [0];
  }
  for (const thread of threads) {
    try {
      setPriority(thread, 10);
    } catch {
      // Not permitted here: that thread runs at the server's priority.
    }
  }
}

function compile(rawJson: string, sources: boolean): string[] {
  const lines: string[] = [];
  const post = (answer: CompilerAnswer) => lines.push(JSON.stringify(answer));
  try {
    const checked = checkPlan(JSON.parse(rawJson));
    post({ stage: 'checked', problems: checked.problems });
    if (!checked.ok) {
      post({ stage: 'compiled', ok: false, problems: [] });
      return lines;
    }
    const compiled = compileInWorker(checked.plan);
    if (!compiled.ok) {
      post({ stage: 'compiled', ok: false, problems: compiled.problems });
      return lines;
    }
    // Each distinct source once: a plan's definitions often share a schema (the probe's 1,000
    // all do: 9 MB of code, written out once per definition before).
    const distinct = new Map<string, number>();
    const definitions: [string, number | null][] = [];
    if (sources && !checked.problems.length) {
      for (const { name, source } of compiled.sources) {
        if (source === null) {
          definitions.push([name, null]);
          continue;
        }
        let i = distinct.get(source);
        if (i === undefined) distinct.set(source, (i = distinct.size));
        definitions.push([name, i]);
      }
    }
    post({ stage: 'compiled', ok: true, definitions });
    lines.push(JSON.stringify(checked.plan));
    for (const source of distinct.keys()) lines.push(JSON.stringify(source));
  } catch (err) {
    // A stack overflow is the compile's cost, not a fault: the server refuses the plan for it.
    post({ stage: 'failed', costly: err instanceof RangeError, message: (err as Error).message });
  }
  return lines;
}

lowerPriority();
const input: Buffer[] = [];
process.stdin.on('data', (chunk: Buffer) => input.push(chunk));
process.stdin.on('end', () => {
  const lines = compile(Buffer.concat(input).toString('utf8'), process.argv.includes('--sources'));
  process.stdout.write(lines.join('\n') + '\n');
});
