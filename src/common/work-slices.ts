import { setImmediate as nextTurn } from 'node:timers/promises';

/**
 * The most of the server's thread that one step of a request's CPU work holds before other
 * requests get a turn. 5 ms: the 50 ms bound on any stop (decisions §13.7) with room for the
 * turns of several requests in between, and few enough yields that their cost (a turn of the
 * event loop each, a few microseconds) stays well under 1 % of the work.
 */
export const SLICE_MS = 5;

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
