import { AppError } from '@app/common/app-error';
import type { KeyTimeBudgets } from '@app/common/rate-limit/time-budget';
import type { ExportBudget } from './export.service';

/** An export is one of the key's reads for the budget, but not for READ_MAX_CONCURRENT_PER_KEY. */
const NO_CONCURRENCY_BOUND = Number.MAX_SAFE_INTEGER;

/** An export's share of its key's read budget; `end` once the export is over. */
export interface AdmittedExport extends ExportBudget {
  end(): void;
}

/**
 * Admits an export of `keyId` against its read budget (READ_TIME_MS_PER_SECOND), as a read is
 * admitted: while the key has read time left, else 429 `rate_limited` with Retry-After. The
 * export's reads and work are then charged chunk by chunk as they happen (not once at its end,
 * as a read's are), so that the key's other reads and exports are turned away while it runs
 * past the budget, and the export itself pauses until the key has time again.
 */
export function admitExport(slots: KeyTimeBudgets, keyId: string, msPerSecond: number): AdmittedExport {
  const admission = slots.take(keyId, NO_CONCURRENCY_BOUND, msPerSecond);
  if (!admission.ok) {
    const retryAfterMs = admission.reason === 'time' ? admission.retryAfterMs : 1_000;
    throw new AppError(
      'rate_limited',
      `This key's reads and exports took more than ${msPerSecond} ms of read time per second; retry after Retry-After.`,
      {
        headers: { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterMs / 1000))) },
        extra: { limitReadMsPerSecond: msPerSecond },
      },
    );
  }
  let ended = false;
  return {
    charge: (ms) => slots.spend(keyId, ms),
    overdrawnMs: () => slots.overdrawn(keyId, msPerSecond),
    end: () => {
      if (ended) return;
      ended = true;
      slots.give(keyId, 0, msPerSecond);
    },
  };
}
