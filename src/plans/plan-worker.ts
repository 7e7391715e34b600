import { Worker } from 'node:worker_threads';
import { builtWorkerFile } from '@app/common/worker-file';
import { CompiledPlan, type CompiledDefinition } from './compiled-plan';
import {
  checkPlan,
  instantiateDefinition,
  type DefinitionSource,
  type PlanCompilation,
  type SourceCompilation,
} from './plan-compiler';
import type { PlanProblem, TrackingPlan } from './plan.types';
import { linearRegExps } from './regexp';

/** The longest a plan's compile may take, start of its worker included. */
export const PLAN_COMPILE_TIMEOUT_MS = 10_000;
/** The compile worker's heap (old generation), which also bounds what the compiled plan holds. */
export const PLAN_COMPILE_HEAP_MB = 128;
/** The most the server's thread spends making a compiled plan runnable before it lets others run. */
const SLICE_MS = 5;

/** Whether a problem is about what the compile would cost, rather than the plan's content. */
export function isCompileCost(problem: PlanProblem): boolean {
  return problem.message.startsWith('Compiling ');
}

function tooCostly(limit: string): SourceCompilation {
  return {
    ok: false,
    problems: [
      { path: '', message: `Compiling the plan would cost more than the server allows (${limit}).` },
    ],
  };
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

/**
 * Compiles in a worker with a heap cap and a deadline; past either, the plan is refused. Without
 * `sources`, the answer carries none: a check does not copy megabytes of code into this thread.
 */
function runWorker(plan: TrackingPlan, sources: boolean): Promise<SourceCompilation> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(builtWorkerFile(__dirname, 'plan-compile.worker.js'), {
      workerData: { plan, sources },
      resourceLimits: {
        maxOldGenerationSizeMb: PLAN_COMPILE_HEAP_MB,
        maxYoungGenerationSizeMb: 16,
        stackSizeMb: 4,
      },
    });
    let settled = false;
    const finish = (answer: SourceCompilation | Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      void worker.terminate();
      if (answer instanceof Error) reject(answer);
      else resolve(answer);
    };
    const timer = setTimeout(
      () => finish(tooCostly(`more than ${PLAN_COMPILE_TIMEOUT_MS / 1000} s of compiling`)),
      PLAN_COMPILE_TIMEOUT_MS,
    );
    worker.once('message', (answer: SourceCompilation) => finish(answer));
    worker.once('error', (err: Error & { code?: string }) => {
      if (err.code === 'ERR_WORKER_OUT_OF_MEMORY' || err instanceof RangeError) {
        finish(tooCostly(`more than ${PLAN_COMPILE_HEAP_MB} MB of memory to compile`));
      } else finish(err);
    });
    worker.once('exit', (code) => finish(new Error(`The plan compiler stopped (exit code ${code})`)));
  });
}

/** The sources of a checked plan's validators, compiled off the server's thread. */
export function compileSourcesOffThread(
  plan: TrackingPlan,
  lane: CompileLane,
  sources = true,
): Promise<SourceCompilation> {
  return oneAtATime(lane, () => runWorker(plan, sources));
}

/**
 * Makes compiled sources runnable on this thread, a slice at a time (SLICE_MS), so that other
 * requests run in between. The worker refused any definition that would take longer alone.
 */
export async function instantiatePlan(
  plan: TrackingPlan,
  sources: DefinitionSource[],
  version: number,
): Promise<CompiledPlan> {
  const regExp = linearRegExps();
  const definitions = new Map<string, CompiledDefinition>();
  let sliceStart = performance.now();
  for (const { name, source } of sources) {
    definitions.set(name, instantiateDefinition(plan.events[name], source, definitions.size, regExp));
    if (performance.now() - sliceStart > SLICE_MS) {
      await new Promise((resolve) => setImmediate(resolve));
      sliceStart = performance.now();
    }
  }
  return new CompiledPlan(version, plan.mode, plan.unplanned, definitions);
}

/** Lets other requests run: the check and the copy of the plan to its worker are separate turns. */
function yieldTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

export type PlanValidation = { ok: true; plan: TrackingPlan } | { ok: false; problems: PlanProblem[] };

/**
 * Checks a plan fully, as storing it requires: its bounds and fields here (cheap), its schemas in
 * the worker. Nothing of the compile stays in this thread.
 */
export async function validatePlan(raw: unknown): Promise<PlanValidation> {
  const checked = checkPlan(raw);
  if (!checked.ok) return checked;
  await yieldTurn();
  const compiled = await compileSourcesOffThread(checked.plan, 'request', false);
  const problems = [...checked.problems, ...(compiled.ok ? [] : compiled.problems)];
  return problems.length ? { ok: false, problems } : { ok: true, plan: checked.plan };
}

/** As `validatePlan`, and the plan made runnable (ingest's plan, or a dry run's). */
export async function compilePlanOffThread(
  raw: unknown,
  version: number,
  lane: CompileLane,
): Promise<PlanCompilation> {
  const checked = checkPlan(raw);
  if (!checked.ok) return checked;
  await yieldTurn();
  const compiled = await compileSourcesOffThread(checked.plan, lane);
  const problems = [...checked.problems, ...(compiled.ok ? [] : compiled.problems)];
  if (problems.length || !compiled.ok) return { ok: false, problems };
  return {
    ok: true,
    plan: checked.plan,
    compiled: await instantiatePlan(checked.plan, compiled.sources, version),
  };
}
