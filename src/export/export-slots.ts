import { AppError } from '@app/common/app-error';

// An export holds its slot for its whole duration, often minutes: a second try a few seconds
// later is the right pace.
const RETRY_AFTER_SECONDS = 5;

/**
 * The exports running on this instance: one per API key (or CLI run), and at most `max` in
 * all, so that exports, which read without pause, leave the read pool to other reads.
 */
export class ExportSlots {
  private readonly running = new Set<string>();

  constructor(private readonly max: number) {}

  /** Takes the slot of `holder`, or throws 429 `rate_limited`; call the returned release once. */
  take(holder: string): () => void {
    if (this.running.has(holder)) {
      throw busy('This key already has an export running on this instance; wait for it to finish.');
    }
    if (this.running.size >= this.max) {
      throw busy(`${this.max} exports are already running on this instance; retry after Retry-After.`);
    }
    this.running.add(holder);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.running.delete(holder);
    };
  }
}

function busy(detail: string): AppError {
  return new AppError('rate_limited', detail, {
    headers: { 'Retry-After': String(RETRY_AFTER_SECONDS) },
    extra: { limitConcurrentExports: 1 },
  });
}
