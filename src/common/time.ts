/** One hour in milliseconds. */
export const HOUR_MS = 3_600_000;

/** One UTC day in milliseconds. */
export const DAY_MS = 86_400_000;

/** The first millisecond of the UTC day that contains `t`. */
export function utcDayStart(t: number): number {
  return Math.floor(t / DAY_MS) * DAY_MS;
}

/** `YYYY-MM-DD` of the UTC day that contains `t`. */
export function utcDateString(t: number): string {
  return new Date(utcDayStart(t)).toISOString().slice(0, 10);
}
