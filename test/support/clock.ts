import { utcDayStart } from '@app/common/time';

/**
 * The clock for a suite whose events sit up to `spanMs` before it, all meant to fall on the clock's
 * UTC date: the real clock, unless the span would reach back across UTC midnight; then the last
 * millisecond of the UTC day before, so that a run just after midnight sees the same days as any other.
 * For events sent through ingest, which clamps times ahead of the receive time; a suite that seeds
 * rows and reads relative ranges (`range=1d`) moves its clock forward instead.
 */
export function clockWithinUtcDay(spanMs: number, real = Date.now()): number {
  const dayStart = utcDayStart(real);
  return real - dayStart >= spanMs ? real : dayStart - 1;
}
