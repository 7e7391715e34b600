import { HOUR_MS, utcDateString } from './time';
import { addDays } from './reads/time-params';

/**
 * App time zones: validation and local calendar days, shared by the server and the CLI. Both
 * use the runtime's ICU data (Intl) and need no database round trip. Every day boundary of the
 * rollups (ingest's dirty marks, the computation, `final`, "today") comes from here, never from
 * PostgreSQL's own copy of the tz data, so that the two can never disagree about one day; a test
 * checks that PostgreSQL knows every accepted name and where their 2026 midnights differ
 * (test/timezones-agreement.e2e-spec.ts).
 */

export const DEFAULT_TIME_ZONE = 'UTC';

// An IANA name: `UTC`, `Europe/Berlin`, `America/Argentina/Buenos_Aires`, `Etc/GMT+5`. Offsets
// such as `+05:00`, which Intl reads as a fixed offset but PostgreSQL as a POSIX zone with the
// opposite sign, and POSIX rules such as `EST5EDT,M3.2.0,M11.1.0` do not match.
const ZONE_NAME = /^[A-Za-z][A-Za-z0-9_-]*(?:\/[A-Za-z0-9_+-]+){0,2}$/;
const MAX_ZONE_LENGTH = 64;

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(zone: string): Intl.DateTimeFormat {
  let f = formatters.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
    });
    formatters.set(zone, f);
  }
  return f;
}

/** True when `zone` is an IANA time zone name (Intl knows it; not an offset or a POSIX rule). */
export function isTimeZone(zone: unknown): zone is string {
  if (typeof zone !== 'string' || zone.length > MAX_ZONE_LENGTH || !ZONE_NAME.test(zone)) return false;
  try {
    formatter(zone);
    return true;
  } catch {
    return false;
  }
}

let canonicalNames: Map<string, string> | undefined;

/**
 * The usual spelling of a zone name that Intl lists (`europe/berlin` → `Europe/Berlin`);
 * other accepted names (aliases such as `Asia/Kolkata`) are kept as given.
 */
export function canonicalTimeZone(zone: string): string {
  canonicalNames ??= new Map(Intl.supportedValuesOf('timeZone').map((z) => [z.toLowerCase(), z]));
  return canonicalNames.get(zone.toLowerCase()) ?? (zone.toLowerCase() === 'utc' ? DEFAULT_TIME_ZONE : zone);
}

/** `YYYY-MM-DD` of the calendar day in `zone` that contains the instant `t` (epoch ms). */
export function localDateString(t: number, zone: string): string {
  if (zone === DEFAULT_TIME_ZONE) return utcDateString(t);
  let year = '';
  let month = '';
  let day = '';
  for (const part of formatter(zone).formatToParts(t)) {
    if (part.type === 'year') year = part.value;
    else if (part.type === 'month') month = part.value;
    else if (part.type === 'day') day = part.value;
  }
  return `${year.padStart(4, '0')}-${month}-${day}`;
}

const MINUTE_MS = 60_000;
const starts = new Map<string, number>();
const MAX_CACHED_STARTS = 50_000;

/**
 * The first instant (epoch ms) of the local day `date` (`YYYY-MM-DD`) in `zone`. Every offset
 * in use lies within ±15 hours, so the start is searched in that window around the UTC
 * midnight, to the minute (zone transitions fall on whole minutes). Exact on days of 23 or 25
 * hours and on days whose midnight is skipped by a transition.
 */
export function localDayStart(date: string, zone: string): number {
  const utcMidnight = Date.parse(`${date}T00:00:00Z`);
  if (zone === DEFAULT_TIME_ZONE) return utcMidnight;
  const key = `${zone} ${date}`;
  const cached = starts.get(key);
  if (cached !== undefined) return cached;
  let lo = (utcMidnight - 15 * HOUR_MS) / MINUTE_MS; // local date < `date` here
  let hi = (utcMidnight + 15 * HOUR_MS) / MINUTE_MS; // local date >= `date` here
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (localDateString(mid * MINUTE_MS, zone) >= date) hi = mid;
    else lo = mid;
  }
  if (starts.size >= MAX_CACHED_STARTS) starts.clear();
  starts.set(key, hi * MINUTE_MS);
  return hi * MINUTE_MS;
}

/** The instants [start, end) of the local day `date` in `zone`, epoch ms. */
export function localDayBounds(date: string, zone: string): { start: number; end: number } {
  return { start: localDayStart(date, zone), end: localDayStart(addDays(date, 1), zone) };
}

/**
 * The local days in `zone` that overlap the instants [start, end): the days to recompute when a
 * day named in another zone received events.
 */
export function localDatesOverlapping(start: number, end: number, zone: string): string[] {
  const dates: string[] = [];
  for (let date = localDateString(start, zone); ; date = addDays(date, 1)) {
    if (localDayStart(date, zone) >= end) break;
    dates.push(date);
  }
  return dates;
}

/**
 * Names the local days of instants in one zone, fast: it remembers the bounds of the last day it
 * named, so that the instants of a batch, nearly all on the same day, cost two comparisons each.
 * Ingest uses it to name the days of its dirty marks.
 */
export class LocalDayNamer {
  private start = 1;
  private end = 0;
  private date = '';

  constructor(readonly zone: string) {}

  dateOf(t: number): string {
    if (t >= this.start && t < this.end) return this.date;
    const date = localDateString(t, this.zone);
    const bounds = localDayBounds(date, this.zone);
    if (t >= bounds.start && t < bounds.end) {
      this.start = bounds.start;
      this.end = bounds.end;
      this.date = date;
    }
    return date;
  }
}

const namers = new Map<string, LocalDayNamer>();

/** The shared namer of `zone` (one per zone in use). */
export function localDayNamer(zone: string): LocalDayNamer {
  let namer = namers.get(zone);
  if (!namer) namers.set(zone, (namer = new LocalDayNamer(zone)));
  return namer;
}
