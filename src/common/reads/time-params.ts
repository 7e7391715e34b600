import { DAY_MS, utcDateString } from '@app/common/time';

// 1000-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z: four-digit years keep every bound an
// ISO string PostgreSQL parses. An offset can move a date-time past either end, so the bounds
// apply to the instant, after the offset.
const MIN_EPOCH_MS = -30_610_224_000_000;
const MAX_EPOCH_MS = 253_402_300_799_999;

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|z|[+-]\d{2}:?\d{2})$/;

function realDay(y: number, m: number, d: number): number | null {
  const t = Date.UTC(y, m - 1, d);
  const back = new Date(t);
  if (back.getUTCFullYear() !== y || back.getUTCMonth() !== m - 1 || back.getUTCDate() !== d) return null;
  return t;
}

/**
 * Parses a `YYYY-MM-DD` UTC day into its first millisecond, or null unless it is a real date
 * (`2026-02-30` is not). Years 1000–9999 only, so that every day is also a valid PostgreSQL date.
 */
export function parseUtcDate(value: string): number | null {
  const m = DATE.exec(value);
  if (!m) return null;
  const year = Number(m[1]);
  if (year < 1000) return null;
  return realDay(year, Number(m[2]), Number(m[3]));
}

/**
 * Parses an instant given as epoch milliseconds (digits only) or as ISO-8601: a date
 * (`2026-11-21`, midnight UTC) or a date-time with an explicit `Z` or offset. A date-time
 * without an offset is refused rather than guessed in some local zone.
 */
export function parseInstant(value: string): number | null {
  if (/^\d{1,15}$/.test(value)) {
    const n = Number(value);
    return n <= MAX_EPOCH_MS ? n : null;
  }
  const day = parseUtcDate(value);
  if (day !== null) return day;
  const m = DATE_TIME.exec(value);
  if (!m) return null;
  const base = realDay(Number(m[1]), Number(m[2]), Number(m[3]));
  if (base === null || Number(m[1]) < 1000) return null;
  const hours = Number(m[4]);
  const minutes = Number(m[5]);
  const seconds = m[6] === undefined ? 0 : Number(m[6]);
  if (hours > 23 || minutes > 59 || seconds > 59) return null;
  const millis = m[7] === undefined ? 0 : Math.floor(Number(`0.${m[7]}`) * 1000);
  let offsetMinutes = 0;
  if (m[8] !== 'Z' && m[8] !== 'z') {
    const sign = m[8][0] === '-' ? -1 : 1;
    const digits = m[8].slice(1).replace(':', '');
    const oh = Number(digits.slice(0, 2));
    const om = Number(digits.slice(2));
    if (oh > 23 || om > 59) return null;
    offsetMinutes = sign * (oh * 60 + om);
  }
  const instant = base + ((hours * 60 + minutes) * 60 + seconds) * 1000 + millis - offsetMinutes * 60_000;
  return instant >= MIN_EPOCH_MS && instant <= MAX_EPOCH_MS ? instant : null;
}

/** Adds whole days to a `YYYY-MM-DD` string. */
export function addDays(date: string, days: number): string {
  return utcDateString(parseUtcDate(date)! + days * DAY_MS);
}

/** Inclusive number of days from `from` to `to` (both `YYYY-MM-DD`). */
export function daySpan(from: string, to: string): number {
  return Math.round((parseUtcDate(to)! - parseUtcDate(from)!) / DAY_MS) + 1;
}
