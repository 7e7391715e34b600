import { isControlCode } from '@app/common/control-characters';
import { WorkSlices } from '@app/common/work-slices';
import type { QuarantineEvent, Rejection, Violation } from '@app/common/plans/ingest-plans.port';
import { EVENT_LIMITS, REDACTED } from './ingest.limits';
import type { AcceptedEvent, EventErrorCode, EventIssue, Payload } from './ingest.types';
import { detectPii, identifierKind } from './pii';
import { keyOf, SENT_FIELDS, type SentField } from '@app/common/events/event-fields';

/** Where an event came from: `POST /api/ingest`, or the Segment or PostHog wire format. */
export type IngestSource = 'native' | 'segment' | 'posthog';

/** Per-request ingest options of the SDK formats. */
export interface IngestOptions {
  source: IngestSource;
  /**
   * Keeps every rejected event in the quarantine with its code, whatever the plan's mode: the
   * SDKs ignore per-event results, so nothing they send may be dropped silently.
   */
  keepRejected: boolean;
}

export const NATIVE: IngestOptions = { source: 'native', keepRejected: false };

/**
 * Codes not kept by `keepRejected`: the plan's own rejections are already quarantined under
 * `enforce`, and a suppressed user's events must not be kept anywhere.
 */
const NOT_KEPT = new Set<EventErrorCode>(['schema_violation', 'unplanned_event', 'user_suppressed']);

/** A rejected event of the request: as sent (field rules) or as normalised (later rules). */
export interface RejectedItem {
  index: number;
  code: EventErrorCode;
  raw: unknown;
  event: AcceptedEvent | null;
}

/**
 * Finds the code of the event the validator just rejected: the one code whose count moved.
 * Only rejections pay for it, and it needs nothing from the validator but its public counts.
 */
export class RejectionCodes {
  private readonly seen: Partial<Record<EventErrorCode, number>> = {};

  next(byCode: Partial<Record<EventErrorCode, number>>): EventErrorCode | null {
    for (const code of Object.keys(byCode) as EventErrorCode[]) {
      const n = byCode[code]!;
      if (n !== (this.seen[code] ?? 0)) {
        this.seen[code] = n;
        return code;
      }
    }
    return null;
  }
}

export function isKept(code: EventErrorCode): boolean {
  return !NOT_KEPT.has(code);
}

// A control character or any surrogate: text without one is storable as it is.
// eslint-disable-next-line no-control-regex
const SUSPECT = /[\u0000-\u001f\u007f-\u009f\ud800-\udfff]/;

/** Whether PostgreSQL can store `s` as text and in JSON: no control character, no lone surrogate. */
function storable(s: string): boolean {
  // Most text has neither, which one native scan shows; paired surrogates need the loop.
  if (!SUSPECT.test(s)) return true;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (isControlCode(c)) return false;
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = s.charCodeAt(i + 1);
      if (!(next >= 0xdc00 && next <= 0xdfff)) return false;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) return false;
  }
  return true;
}

/** The string as the quarantine can store it, or null. */
function text(value: unknown, max: number): string | null {
  if (typeof value !== 'string' || value.length === 0) return null;
  const s = value.length > max ? value.slice(0, max) : value;
  return storable(s) ? s : null;
}

/** An error's field or message as the quarantine can store it: what it cannot is replaced. */
function clean(s: string): string {
  return storable(s) ? s : Array.from(s, (ch) => (storable(ch) ? ch : '\ufffd')).join('');
}

/** The flat, storable part of a rejected event's payload; personal data redacted. */
function keptPayload(value: unknown): Payload | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const out: Payload = {};
  let n = 0;
  const obj = value as Record<string, unknown>;
  for (const key in obj) {
    if (!Object.hasOwn(obj, key)) continue;
    if (n >= EVENT_LIMITS.payloadMaxKeys) break;
    const v = obj[key];
    const k = text(key, EVENT_LIMITS.payloadKeyMax);
    if (k === null) continue;
    if (typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v))) out[k] = v;
    else if (typeof v === 'string') {
      const s = text(v, EVENT_LIMITS.payloadStringMax);
      if (s === null) continue;
      out[k] = detectPii(s) === null ? s : REDACTED;
    } else continue;
    n++;
  }
  return n === 0 ? null : out;
}

/** What the quarantine keeps of one sent field of an event the field rules refused. */
function keptValue(f: SentField, value: unknown): unknown {
  switch (f.type) {
    case 'text':
      return text(value, 'maxLength' in f ? f.maxLength : EVENT_LIMITS.contextMax);
    case 'int8':
      return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : null;
    case 'bool':
      return value === true;
    case 'float8':
      return typeof value === 'number' && Number.isFinite(value) ? value : null;
    case 'json':
      return keptPayload(value);
  }
}

/** The key of each of SENT_FIELDS, in its order. */
const SENT_KEYS = SENT_FIELDS.map(keyOf);

/**
 * What the quarantine keeps of an event the field rules refused: each sent field's part that is
 * storable as it is, user ids already pseudonymised by the caller, personal data never raw.
 */
export function keptEvent(
  raw: unknown,
  receivedAt: number,
  testMode: boolean,
  pseudonymise: (kind: 'email' | 'phone', value: string) => string,
): QuarantineEvent {
  const ev = (typeof raw === 'object' && raw !== null && !Array.isArray(raw) ? raw : {}) as Record<
    string,
    unknown
  >;
  const out: Record<string, unknown> = {};
  for (let i = 0; i < SENT_FIELDS.length; i++) {
    out[SENT_KEYS[i]] = keptValue(SENT_FIELDS[i], ev[SENT_FIELDS[i].name]);
  }
  const kept = out as unknown as QuarantineEvent;
  const user = kept.anonymousUserId;
  const kind = user === null ? null : identifierKind(user);
  kept.eventName ??= '(invalid)';
  if (kind !== null) kept.anonymousUserId = pseudonymise(kind, user!);
  kept.ts = receivedAt;
  kept.isTestMode = testMode || kept.isTestMode;
  return kept;
}

const EVENT_ID = SENT_FIELDS.find((f) => f.name === 'eventId')!;

/**
 * A rejected event's position and event id, as its warnings name it, without the record the
 * quarantine would keep (the id as that record would have it).
 */
export function rejectedRef({ index, raw, event }: RejectedItem): { index: number; eventId: string | null } {
  if (event !== null) return { index, eventId: event.eventId };
  const ev = typeof raw === 'object' && raw !== null ? (raw as Record<string, unknown>) : {};
  return { index, eventId: keptValue(EVENT_ID, ev.eventId) as string | null };
}

type KeptRejection = Rejection<QuarantineEvent & { index: number }>;

/** The errors of a request by event, as the quarantine's violations. */
function violationsByIndex(errors: EventIssue<EventErrorCode>[]): Map<number, Violation[]> {
  const byIndex = new Map<number, Violation[]>();
  for (const e of errors) {
    const list = byIndex.get(e.index) ?? [];
    // The quarantine's violations are a JSON list of {field, code, message}, whatever the code.
    list.push({ field: clean(e.field), code: e.code as Violation['code'], message: clean(e.message) });
    byIndex.set(e.index, list);
  }
  return byIndex;
}

function rejectionOf(
  { index, code, raw, event }: RejectedItem,
  byIndex: Map<number, Violation[]>,
  build: (raw: unknown) => QuarantineEvent,
): KeptRejection {
  return {
    event: event ?? { ...build(raw), index },
    code: code as Violation['code'],
    violations: byIndex.get(index) ?? [
      { field: 'event', code: code as Violation['code'], message: `Rejected with ${code}.` },
    ],
  };
}

/**
 * The quarantine records of a request's kept rejections, with the errors listed for each. The
 * event loop is handed back after every SLICE_MS of work: what is kept of 1,000 refused events
 * (their fields cut, scanned for personal data) took up to 46 ms at once, during which every
 * other request of the instance waited.
 */
export async function keptRejections(
  items: RejectedItem[],
  errors: EventIssue<EventErrorCode>[],
  build: (raw: unknown) => QuarantineEvent,
): Promise<KeptRejection[]> {
  const byIndex = violationsByIndex(errors);
  const out: KeptRejection[] = [];
  const slices = new WorkSlices();
  for (const item of items) {
    out.push(rejectionOf(item, byIndex, build));
    if (slices.due) await slices.yield();
  }
  return out;
}
