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
// the plan's validator sources, or its problems.
const { plan } = workerData as { plan: TrackingPlan };
parentPort!.postMessage(compileInWorker(plan));
