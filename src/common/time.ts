/** One UTC day in milliseconds. */
export const DAY_MS = 86_400_000;

/** One hour in milliseconds. */
export const HOUR_MS = 3_600_000;
