import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { Logger } from '@nestjs/common';
import { AppError } from '@app/common/app-error';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { builtWorkerFile } from '@app/common/worker-file';
import { CompiledPlan, type PlanDefinition } from './compiled-plan';
import { checkPlan, instantiateDefinition, type PlanCompilation } from './plan-compiler';
import type { PlanProblem, TrackingPlan } from './plan.types';
import { linearRegExps } from './regexp';

/**
 * When a compile is given up (CompileDeadline). The plan's cost is the compiler's CPU time, all of
 * its threads: past `cpuMs` the plan is refused for it. The clock only bounds the wait: the
 * compiler runs below the server's priority, so on a busy machine a cheap plan can take many
 * times its CPU time to compile, which is no verdict on the plan.
 */
export interface CompileDeadline {
  /** The compiler's CPU time past which the plan is refused (400, its cost). */
  cpuMs: number;
  /** The longest the compile may take on the clock, start of its process included. */
  wallMs: number;
}

/**
 * Each lane's deadline. A plan sent with a request may wait up to a minute for a busy machine,
 * then gets 503; a stored plan keeps ingest's first batch waiting, so it is given up after 10 s
 * either way, not applied meanwhile and tried again later (PlansService).
 */
export const COMPILE_DEADLINES: Record<CompileLane, CompileDeadline> = {
  request: { cpuMs: 10_000, wallMs: 60_000 },
  stored: { cpuMs: 10_000, wallMs: 10_000 },
};

/**
 * A process's CPU time in ms, user and system, over all of its threads (Linux's /proc; 10 ms
 * ticks), or null where it cannot be read.
 */
export function processCpuMs(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // After the command's name in parentheses, which may hold spaces: utime and stime are the
    // 14th and 15th fields of the line, the 12th and 13th after the name.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? ticks * 10 : null;
  } catch {
    return null;
  }
}

/** The compiler's heap (old generation), which also bounds what the compiled plan holds. */
export const PLAN_COMPILE_HEAP_MB = 128;

/** Whether a problem is about what the compile would cost, rather than the plan's content. */
export function isCompileCost(problem: PlanProblem): boolean {
  return problem.message.startsWith('Compiling ');
}

function tooCostly(limit: string): PlanProblem {
  return { path: '', message: `Compiling the plan would cost more than the server allows (${limit}).` };
}

/**
 * Whose compile it is: a plan sent with a request (PUT, the dry run), or a stored plan that ingest
 * needs. Each lane runs one compile at a time, so that a tenant sending costly plans back to back
 * queues behind itself, never in front of another app's stored plan.
 */
export type CompileLane = 'request' | 'stored';

const lanes: Record<CompileLane, Promise<unknown>> = {
  request: Promise.resolve(),
  stored: Promise.resolve(),
};

function oneAtATime<T>(lane: CompileLane, task: () => Promise<T>): Promise<T> {
  const run = lanes[lane].then(task, task);
  lanes[lane] = run.catch(() => undefined);
  return run;
}

/** What the compiler's process (plan-compile.worker.ts) writes: its check, then its compile. */
export type CompilerAnswer =
  | { stage: 'checked'; problems: PlanProblem[] }
  | { stage: 'compiled'; ok: true; definitions: [name: string, source: number | null][] }
  | { stage: 'compiled'; ok: false; problems: PlanProblem[] }
  | { stage: 'failed'; costly: boolean; message: string };

/**
 * A plan checked and compiled off the server's thread: the normalised plan, its JSON text (as the
 * compiler wrote it, to be stored as is) and its validators' sources.
 */
type OffThreadCompilation =
  | { ok: true; plan: TrackingPlan; planJson: string; sources: LazySource[] }
  | { ok: false; problems: PlanProblem[] };

/** The compiler's V8 settings: its heap cap (old and young generations) and its stack. */
const COMPILER_ARGS = [
  `--max-old-space-size=${PLAN_COMPILE_HEAP_MB}`,
  '--max-semi-space-size=8',
  '--stack-size=3000',
];

/** The most of the compiler's error output kept, to tell why it stopped. */
const STDERR_KEPT = 4096;

/** A definition's validator source, decoded from the compiler's output when first asked for. */
export interface LazySource {
  name: string;
  source: () => string | null;
}

/**
 * The compiler's output (plan-compile.worker.ts) as lines of bytes: its check, its compile, the
 * plan's JSON text, then one line per distinct validator source. The sources (about 9 KB of code
 * per definition of the probe's plan) are decoded only when a definition is first used: decoding
 * and parsing all of them at once took 80 ms of the server's thread.
 */
function outputLines(output: Buffer[]): Buffer[] {
  const all = Buffer.concat(output);
  const lines: Buffer[] = [];
  for (let at = 0; at < all.length;) {
    const end = all.indexOf(0x0a, at);
    const stop = end === -1 ? all.length : end;
    if (stop > at) lines.push(all.subarray(at, stop));
    at = stop + 1;
  }
  return lines;
}

/** A line of the compiler's output as JSON, or null when it is not (cut short by the process's end). */
function parsedLine<T>(line: Buffer | undefined): T | null {
  if (line === undefined) return null;
  try {
    return JSON.parse(line.toString('utf8')) as T;
  } catch {
    return null;
  }
}

/** The compiler's answer from its output lines, or null if it has none. */
function readAnswer(lines: Buffer[]): OffThreadCompilation | Error | null {
  const checked = parsedLine<CompilerAnswer>(lines[0]);
  const answer = parsedLine<CompilerAnswer>(lines[1]);
  if (checked === null || answer === null) return null;
  if (checked.stage !== 'checked') return new Error('The plan compiler answered out of order');
  if (answer.stage === 'failed') {
    if (answer.costly) return null;
    return new Error(`The plan compiler failed: ${answer.message}`);
  }
  if (answer.stage !== 'compiled') return new Error('The plan compiler answered out of order');
  if (!answer.ok) return { ok: false, problems: [...checked.problems, ...answer.problems] };
  if (checked.problems.length) return { ok: false, problems: checked.problems };
  const planJson = lines[2].toString('utf8');
  const decoded: (string | undefined)[] = [];
  const source = (i: number) => (decoded[i] ??= JSON.parse(lines[3 + i].toString('utf8')) as string);
  return {
    ok: true,
    plan: JSON.parse(planJson) as TrackingPlan,
    planJson,
    sources: answer.definitions.map(([name, i]) => ({ name, source: () => (i === null ? null : source(i)) })),
  };
}

const logger = new Logger('PlanCompiler');

/**
 * Why the compiler's process ended without an answer:
 * - `heap`: past its heap, which V8 reports with this message before it aborts (or an exit
 *   with nothing written);
 * - `aborted`: ended by a signal for another reason. V8 aborts the process on its other fatal
 *   errors (a native stack overflow, an allocation past a size V8 allows), and each of them is
 *   what this plan costs to compile, which the server refuses as for the heap; the stderr is
 *   logged for the operator;
 * - `fault`: exited with an error of its own (an exception the script did not catch), a fault of
 *   the server's, not of the plan.
 */
export function compilerStop(
  code: number | null,
  signal: NodeJS.Signals | null,
  stderr: string,
): 'heap' | 'aborted' | 'fault' {
  if (code === 0 || /heap out of memory|Allocation failed/i.test(stderr)) return 'heap';
  return signal !== null ? 'aborted' : 'fault';
}

/**
 * Checks and compiles a plan in a process of its own, below the server's priority, with a heap
 * cap and a deadline on its CPU time; past either, the plan is refused, with the problems its
 * check found. Past the deadline's clock with CPU time to spare, the machine was too busy: 503.
 * Without `sources`, the answer carries none: a check does not copy megabytes of code into this
 * thread. The plan goes to the compiler as JSON text, so that this thread neither walks its
 * bounds nor reads its fields, and the answer comes back as text, parsed once.
 */
async function runCompiler(
  raw: unknown,
  sources: boolean,
  deadline: CompileDeadline,
  onStart?: (pid: number | undefined) => void,
): Promise<OffThreadCompilation> {
  // Writing the plan out, and starting the compiler, each take a turn of their own (5–10 ms for
  // a plan of 625 KB), apart from the turn that read the body.
  await nextTurn();
  let rawJson: string;
  try {
    rawJson = JSON.stringify(raw);
  } catch (err) {
    // A body nested too deep to write out (thousands of levels) is past the nesting bound: the
    // walk here, over an explicit stack, names it.
    const checked = checkPlan(raw);
    if (checked.ok) throw err;
    return checked;
  }
  await nextTurn();
  return new Promise((resolve, reject) => {
    const script = builtWorkerFile(__dirname, 'plan-compile.worker.js');
    const child = spawn(process.execPath, [...COMPILER_ARGS, script, ...(sources ? ['--sources'] : [])], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const output: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => output.push(chunk));
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (text: string) => {
      stderr = (stderr + text).slice(-STDERR_KEPT);
    });
    // A compiler that stopped early closes its input: that is told by its exit, not here.
    child.stdin.on('error', () => undefined);
    child.stdin.end(rawJson);
    let settled = false;
    const lines = () => outputLines(output);
    const costly = (limit: string) => refusedForCost(lines(), limit);
    const finish = (answer: () => OffThreadCompilation | Error): void => {
      if (settled) return;
      settled = true;
      stopWatching();
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      try {
        const settledWith = answer();
        if (settledWith instanceof Error) reject(settledWith);
        else resolve(settledWith);
      } catch (err) {
        reject(err as Error);
      }
    };
    const stopWatching = watchDeadline(child.pid, deadline, (over) =>
      finish(() =>
        over.costly
          ? costly(`more than ${deadline.cpuMs / 1000} s of compiling`)
          : starved(deadline, over.cpuMs),
      ),
    );
    onStart?.(child.pid);
    child.once('error', (err) => finish(() => err));
    // 'close': it has exited and its output has been read to the end.
    child.once('close', (code, signal) =>
      finish(() => {
        const answer = readAnswer(lines());
        if (answer !== null) return answer;
        const stopped = compilerStop(code, signal, stderr);
        if (stopped === 'fault') {
          return new Error(`The plan compiler stopped (exit code ${code}): ${stderr.trim()}`);
        }
        if (stopped === 'aborted') logger.warn(`The plan compiler stopped (${signal}): ${stderr.trim()}`);
        return costly(
          stopped === 'heap'
            ? `more than ${PLAN_COMPILE_HEAP_MB} MB of memory to compile`
            : 'its compiler stopped',
        );
      }),
    );
  });
}

/**
 * Looks at the compiler's CPU time (`pid`) until it passes `deadline.cpuMs` (`costly`) or the
 * clock passes `deadline.wallMs` first; gives the function that stops looking. Where the CPU
 * time cannot be read, the clock stands for it.
 */
function watchDeadline(
  pid: number | undefined,
  deadline: CompileDeadline,
  end: (over: { costly: boolean; cpuMs: number }) => void,
): () => void {
  const started = performance.now();
  const look = () => {
    const wallMs = performance.now() - started;
    const cpuMs = (pid === undefined ? null : processCpuMs(pid)) ?? wallMs;
    if (cpuMs >= deadline.cpuMs) end({ costly: true, cpuMs });
    else if (wallMs >= deadline.wallMs) end({ costly: false, cpuMs });
    // Its threads can spend CPU faster than the clock runs: look again before they could have
    // spent the rest.
    else timer = setTimeout(look, nextLook(deadline.cpuMs - cpuMs, deadline.wallMs - wallMs));
  };
  let timer = setTimeout(look, nextLook(deadline.cpuMs, deadline.wallMs));
  return () => clearTimeout(timer);
}

/** A plan checked and compiled off the server's thread, one compile at a time per lane. */
function compileOffThread(
  raw: unknown,
  lane: CompileLane,
  sources: boolean,
  options: CompileOptions = {},
): Promise<OffThreadCompilation> {
  const deadline = options.deadline ?? COMPILE_DEADLINES[lane];
  return oneAtATime(lane, () => runCompiler(raw, sources, deadline, options.started));
}

/** A compile's deadline, when not its lane's, and a look at its process once started (tests). */
export interface CompileOptions {
  deadline?: CompileDeadline;
  started?: (pid: number | undefined) => void;
}

/** How long until the next look at a compile's CPU time. */
function nextLook(cpuLeftMs: number, wallLeftMs: number): number {
  return Math.max(50, Math.min(cpuLeftMs / availableParallelism(), wallLeftMs));
}

/** The plan refused for what its compile costs (`limit`), with the problems its check found. */
function refusedForCost(lines: Buffer[], limit: string): OffThreadCompilation {
  const first = parsedLine<CompilerAnswer>(lines[0]);
  const checkProblems = first?.stage === 'checked' ? first.problems : [];
  return { ok: false, problems: [...checkProblems, tooCostly(limit)] };
}

/** A compile given up on the clock while its CPU time was under the deadline. */
function starved(deadline: CompileDeadline, cpuMs: number): AppError {
  return new AppError(
    'service_unavailable',
    `The server was too busy to compile the plan within ${deadline.wallMs / 1000} s (it had used ${Math.round(cpuMs)} ms ` +
      'of CPU); nothing was stored. Retry after Retry-After.',
    { headers: { 'Retry-After': '10' } },
  );
}

/**
 * A compiled plan whose definitions are made runnable on this thread as events first use them
 * (DeferredDefinition): making them all at once cost more than the 50 ms bound in collections.
 */
export function instantiatePlan(plan: TrackingPlan, sources: LazySource[], version: number): CompiledPlan {
  const regExp = linearRegExps();
  const definitions = new Map<string, PlanDefinition>();
  for (const { name, source } of sources) {
    const index = definitions.size;
    definitions.set(name, {
      index,
      make: () => instantiateDefinition(plan.events[name], source(), index, regExp),
    });
  }
  return new CompiledPlan(version, plan.mode, plan.unplanned, definitions);
}

export type PlanValidation =
  { ok: true; plan: TrackingPlan; planJson: string } | { ok: false; problems: PlanProblem[] };

/**
 * Checks a plan fully, as storing it requires: its bounds, fields and schemas, all in the compiler.
 * Nothing of the compile stays in this thread.
 */
export async function validatePlan(raw: unknown, options?: CompileOptions): Promise<PlanValidation> {
  const compiled = await compileOffThread(raw, 'request', false, options);
  return compiled.ok ? { ok: true, plan: compiled.plan, planJson: compiled.planJson } : compiled;
}

/** As `validatePlan`, and the plan made runnable (ingest's plan, or a dry run's). */
export async function compilePlanOffThread(
  raw: unknown,
  version: number,
  lane: CompileLane,
): Promise<PlanCompilation> {
  const compiled = await compileOffThread(raw, lane, true);
  if (!compiled.ok) return compiled;
  return {
    ok: true,
    plan: compiled.plan,
    compiled: instantiatePlan(compiled.plan, compiled.sources, version),
  };
}
