/** What the SDK formats' mappings share: the result shape, properties, times. */

/** A Tally ingest event as `POST /api/ingest` takes it (the validator checks it afterwards). */
export type TallyEvent = Record<string, unknown>;

/** A field a mapping left out of an event, reported as a warning of that message. */
export interface MappingWarning {
  /** The message's position in the SDK's batch. */
  index: number;
  field: string;
  code: 'ignored_field' | 'invalid_format';
  message: string;
}

/** A message that is no event at all: rejected by the mapping, before ingest, and counted. */
export interface MappingRejection {
  index: number;
  field: string;
  code: 'invalid_type' | 'invalid_value';
  message: string;
}

/** One SDK body mapped onto Tally's ingest path. */
export interface MappedBatch {
  /** The events to ingest, in order. */
  events: TallyEvent[];
  /** For each event, the position of its message in the SDK's batch. */
  messageIndexes: number[];
  /** The batch's send time (epoch ms), for the clock-skew correction; null when absent or unreadable. */
  sentAt: number | null;
  /** Messages counted and not stored (identify, group, alias and the like). */
  acknowledged: number;
  warnings: MappingWarning[];
  rejections: MappingRejection[];
}

export type AccountPseudonym = (accountId: string) => string;

/** A batch with nothing mapped yet. */
export function emptyBatch(sentAt: number | null): MappedBatch {
  return { events: [], messageIndexes: [], sentAt, acknowledged: 0, warnings: [], rejections: [] };
}

/**
 * A body's messages and how each one is mapped, so that the caller can map a large batch a slice
 * at a time, with other requests' turns between the slices.
 */
export interface BodyMapping {
  readonly messages: readonly unknown[];
  /** The batch's send time (epoch ms); null when absent or unreadable. */
  readonly sentAt: number | null;
  /** Maps `messages[index]` into `out`: an event, an acknowledged message or a rejection. */
  mapMessage(out: MappedBatch, index: number): void;
}

/** Every message of `mapping` mapped at once; null for a body that holds no message at all. */
export function mapAll(mapping: BodyMapping | null): MappedBatch | null {
  if (mapping === null) return null;
  const out = emptyBatch(mapping.sentAt);
  for (let i = 0; i < mapping.messages.length; i++) mapping.mapMessage(out, i);
  return out;
}

/** Nesting depth past which a property is dropped rather than flattened. */
const MAX_FLATTEN_DEPTH = 5;

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function stringOrUndefined(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/** An ISO-8601 time as epoch ms; a number is passed through for the validator to judge. */
export function timeOf(value: unknown): number | undefined | null {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'number') return value;
  if (typeof value !== 'string') return null;
  const ms = utcMillisOf(value) ?? Date.parse(value);
  return Number.isFinite(ms) ? ms : null;
}

const DAYS_IN_MONTH = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
/** Days before each month of a common year. */
const DAYS_BEFORE_MONTH = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
/** Leap years from year 1 to 1969. */
const LEAPS_BEFORE_1970 = 477;

/** Days from 1970-01-01 to January 1st of `year` (1970 or later), as Date.UTC counts them. */
function daysSince1970(year: number): number {
  // Leap years before `year`: every 4th, less the centuries, plus every 400th.
  const y = year - 1;
  const leaps = Math.floor(y / 4) - Math.floor(y / 100) + Math.floor(y / 400) - LEAPS_BEFORE_1970;
  return (year - 1970) * 365 + leaps;
}

/** The digits of `s` from `from` to `to` as a number, or -1 if one is not a digit. */
function digits(s: string, from: number, to: number): number {
  let n = 0;
  for (let i = from; i < to; i++) {
    const d = s.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return -1;
    n = n * 10 + d;
  }
  return n;
}

/**
 * `YYYY-MM-DDTHH:MM:SS.sssZ`, the form every SDK sends, read without Date.parse (several times
 * cheaper, on every message), and from 1970 on without Date.UTC either; anything else returns
 * null and is left to Date.parse.
 */
export function utcMillisOf(s: string): number | null {
  if (s.length !== 24 || s[4] !== '-' || s[7] !== '-' || s[10] !== 'T' || s[13] !== ':') return null;
  if (s[16] !== ':' || s[19] !== '.' || s[23] !== 'Z') return null;
  const year = digits(s, 0, 4);
  const month = digits(s, 5, 7);
  const day = digits(s, 8, 10);
  const hour = digits(s, 11, 13);
  const minute = digits(s, 14, 16);
  const second = digits(s, 17, 19);
  const ms = digits(s, 20, 23);
  if (year < 0 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23) return null;
  if (minute < 0 || minute > 59 || second < 0 || second > 59 || ms < 0) return null;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  if (day > DAYS_IN_MONTH[month - 1] || (month === 2 && day === 29 && !leap)) return null;
  // Date.UTC reads years 0 to 99 as 1900 to 1999: those keep its answer.
  if (year < 1970) return Date.UTC(year, month - 1, day, hour, minute, second, ms);
  const days = daysSince1970(year) + DAYS_BEFORE_MONTH[month - 1] + (leap && month > 2 ? 1 : 0) + day - 1;
  return ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + ms;
}

/** Sets `field` on the event unless the value is absent. */
export function put(event: TallyEvent, field: string, value: unknown): void {
  if (value !== undefined && value !== null) event[field] = value;
}

/** Where flattening reports what it drops: the message and the field prefix (`properties`). */
export interface FlattenContext {
  index: number;
  source: string;
  warnings: MappingWarning[];
}

/**
 * Puts `value`, found at `path`, into `out`: a nested object as dotted keys (`cart.total`), up to
 * MAX_FLATTEN_DEPTH levels; an array, or deeper nesting, is dropped with a warning. Returns how
 * many keys it put.
 */
export function flattenInto(
  out: Record<string, unknown>,
  value: unknown,
  path: string,
  depth: number,
  ctx: FlattenContext,
): number {
  if (typeof value !== 'object' || value === null) {
    out[path] = value;
    return 1;
  }
  const field = `${ctx.source}.${path}`;
  if (Array.isArray(value)) {
    ctx.warnings.push({
      index: ctx.index,
      field,
      code: 'ignored_field',
      message: `${field} is an array; arrays are not stored.`,
    });
    return 0;
  }
  if (depth + 1 >= MAX_FLATTEN_DEPTH) {
    ctx.warnings.push({
      index: ctx.index,
      field,
      code: 'ignored_field',
      message: `${field} nests deeper than ${MAX_FLATTEN_DEPTH} levels; not stored.`,
    });
    return 0;
  }
  let n = 0;
  const obj = value as Record<string, unknown>;
  for (const key in obj) {
    if (Object.hasOwn(obj, key)) n += flattenInto(out, obj[key], `${path}.${key}`, depth + 1, ctx);
  }
  return n;
}

/**
 * Flattens properties into a payload (see flattenInto). Properties with nothing to flatten are
 * the payload as they are.
 */
export function flattenProperties(
  properties: unknown,
  index: number,
  source: string,
  warnings: MappingWarning[],
): Record<string, unknown> | undefined {
  if (!isObject(properties)) return undefined;
  let flat = true;
  let keys = 0;
  for (const key in properties) {
    if (!Object.hasOwn(properties, key)) continue;
    keys++;
    const value = properties[key];
    if (typeof value === 'object' && value !== null) flat = false;
  }
  if (flat) return keys > 0 ? properties : undefined;
  const out: Record<string, unknown> = {};
  const ctx = { index, source, warnings };
  let n = 0;
  for (const key in properties) {
    if (Object.hasOwn(properties, key)) n += flattenInto(out, properties[key], key, 0, ctx);
  }
  return n > 0 ? out : undefined;
}

/** `floatValue` ← `value`, else `revenue`, when a number. */
export function floatValueOf(properties: unknown): number | undefined {
  if (!isObject(properties)) return undefined;
  if (typeof properties.value === 'number') return properties.value;
  if (typeof properties.revenue === 'number') return properties.revenue;
  return undefined;
}

/** Maps the message's `timestamp` onto `eventTime`, with a warning when it is unreadable. */
export function putTime(
  event: TallyEvent,
  value: unknown,
  index: number,
  field: string,
  warnings: MappingWarning[],
): void {
  const ms = timeOf(value);
  if (ms === null) {
    warnings.push({
      index,
      field,
      code: 'invalid_format',
      message: `${field} is not an ISO-8601 time; the receive time is used.`,
    });
  } else if (ms !== undefined) {
    event.eventTime = ms;
  }
}

/** The batch's send time as epoch ms (an ISO string or a number), or null. */
export function sentAtOf(value: unknown): number | null {
  const ms = timeOf(value);
  return typeof ms === 'number' && Number.isSafeInteger(ms) && ms >= 0 ? ms : null;
}
