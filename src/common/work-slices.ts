import { setImmediate as nextTurn } from 'node:timers/promises';

/**
 * The most of the server's thread that one step of a request's CPU work holds before other
 * requests get a turn. Another app's request takes several steps of its own (its body, its
 * check, each statement's answer), and each waits out the slice running when it is ready, so
 * the slice is paid several times per request: 1 ms keeps that within a few milliseconds, where
 * 5 ms slices doubled a steady victim's p99 beside a key sending 1,000-event batches. A yield
 * costs a turn of the event loop, a few microseconds: no change showed in ingest's CPU per
 * event (docs/performance.md, "Slices of 1 ms").
 */
export const SLICE_MS = 1;

/**
 * Work done in slices of at most `sliceMs` of the thread, with other requests' turns between
 * them. The work calls `due` as often as it likes (it reads the clock only) and `yield()` when it
 * is: in a loop, `if (slices.due) await slices.yield()`.
 *
 * `around` runs on either side of each pause: a CPU meter stops there (process.cpuUsage counts
 * whatever runs meanwhile, which is other requests' work).
 */
export class WorkSlices {
  private started = performance.now();

  constructor(
    private readonly sliceMs = SLICE_MS,
    private readonly around?: { pause(): void; resume(): void },
  ) {}

  /** Whether the current slice has run its time. */
  get due(): boolean {
    return performance.now() - this.started > this.sliceMs;
  }

  /** Lets other work run, then starts the next slice. */
  async yield(): Promise<void> {
    this.around?.pause();
    await nextTurn();
    this.around?.resume();
    this.started = performance.now();
  }
}
