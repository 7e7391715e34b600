import { parentPort, workerData } from 'node:worker_threads';
import { compileInWorker } from './plan-compiler';
import type { TrackingPlan } from './plan.types';

// One plan per worker (plan-worker.ts starts it with a heap cap and a deadline): the answer is
// the plan's validator sources, or its problems.
const { plan } = workerData as { plan: TrackingPlan };
parentPort!.postMessage(compileInWorker(plan));
