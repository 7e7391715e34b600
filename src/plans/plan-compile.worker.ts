import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { compileInWorker } from './plan-compiler';
import type { TrackingPlan } from './plan.types';

// Below the server's own thread (on Linux a thread's nice value is its own): a compile yields
// the core to requests when the machine is busy.
try {
  setPriority(10);
} catch {
  // Not permitted here: the compile runs at the server's priority.
}

// One plan per worker (plan-worker.ts starts it with a heap cap and a deadline): the answer is
// the plan's validator sources (none when the server only checks the plan), or its problems.
const { plan, sources } = workerData as { plan: TrackingPlan; sources: boolean };
const answer = compileInWorker(plan);
parentPort!.postMessage(answer.ok && !sources ? { ok: true, sources: [] } : answer);
