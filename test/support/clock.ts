import { utcDayStart } from '@app/common/time';

/**
 * The clock for a suite whose events sit up to `spanMs` before it, all meant to fall on the
 * clock's UTC date: the real clock, unless the span would reach back across UTC midnight, so that
 * a run just after midnight sees the same days as any other. Then, `back` (for events sent
 * through ingest, which clamps times ahead of the receive time): the last millisecond of the UTC
 * day before. `ahead` (for a suite that seeds rows and reads ranges relative to the real day,
 * such as `range=1d`): `spanMs` into the real UTC day, a little ahead of the real clock, which
 * only orders what is stored.
 */
export function clockWithinUtcDay(
  spanMs: number,
  move: 'back' | 'ahead' = 'back',
  real = Date.now(),
): number {
  const dayStart = utcDayStart(real);
  if (real - dayStart >= spanMs) return real;
  return move === 'back' ? dayStart - 1 : dayStart + spanMs;
}
