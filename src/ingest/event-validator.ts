import { isControlCode } from '@app/common/control-characters';
import { normaliseLocale, normaliseTimezone } from './context-formats';
import { EVENT_LIMITS, FUTURE_TOLERANCE_MS, MAX_ISSUES_PER_EVENT, REDACTED } from './ingest.limits';
import type { SuppressionMatcher } from '@app/common/suppressions/user-suppressions';
import type {
  AcceptedEvent,
  EventErrorCode,
  EventIssue,
  EventWarningCode,
  Payload,
  PayloadValue,
  PiiPolicy,
} from './ingest.types';
import { jsonByteLength } from './json-size';
import { detectPii, identifierKind } from './pii';

/** An issue found by a rule applied after the field rules. */
export interface LaterIssue<C> {
  field: string;
  code: C;
  message: string;
}

/** What the per-event rules need to know about the request. */
export interface EventRules {
  /** The request's receive time, epoch ms. */
  receivedAt: number;
  /** Added to every `eventTime` (the client clock correction); 0 for none. */
  skewMs: number;
  /** Effective times before this are `event_too_old`. */
  oldestTs: number;
  maxEventBytes: number;
  piiPolicy: PiiPolicy;
  /** A test key makes every event a test event. */
  forceTestMode: boolean;
  /** Replaces an email or phone user id with a stable pseudonym. */
  pseudonymise(kind: 'email' | 'phone', value: string): string;
  /** The most errors, and the most warnings, the response lists; all are counted. Default: all. */
  maxIssuesListed?: number;
  /** The app's suppressed users (matched on the stored user id); null or absent when none. */
  suppressed?: SuppressionMatcher | null;
}

const CONTEXT_FIELDS = ['platform', 'appVersion', 'buildNumber', 'osVersion', 'deviceModel'] as const;

const KNOWN_FIELDS = new Set<string>([
  'eventName',
  'anonymousUserId',
  'sessionId',
  'eventTime',
  'eventId',
  'isTestMode',
  'floatValue',
  'payload',
  'locale',
  'timezone',
  'privacyMode',
  ...CONTEXT_FIELDS,
]);

type Raw = Record<string, unknown>;

function isPlainObject(v: unknown): v is Raw {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export const TEXT_OK = 0;
export const TEXT_TOO_LONG = 1;
/** PostgreSQL refuses NUL in text and jsonb, and unpaired surrogates in jsonb. */
export const TEXT_UNSTORABLE = 2;
export const TEXT_CONTROL = 3;

/**
 * One pass over a string: NUL or an unpaired surrogate (unstorable), a C0/C1 control character
 * or DEL (when `rejectControl`), and more than `max` code points. A plain char-code loop: on the
 * short strings events carry it is several times faster than regular expressions or
 * isWellFormed() plus indexOf().
 */
export function scanText(s: string, max: number, rejectControl: boolean): number {
  const n = s.length;
  // Each code point is at most two UTF-16 units.
  if (n > 2 * max) return TEXT_TOO_LONG;
  let points = n;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (isControlCode(c)) {
      if (c === 0) return TEXT_UNSTORABLE;
      if (rejectControl) return TEXT_CONTROL;
    } else if (c >= 0xd800 && c <= 0xdfff) {
      const d = i + 1 < n ? s.charCodeAt(i + 1) : 0;
      if (c > 0xdbff || d < 0xdc00 || d > 0xdfff) return TEXT_UNSTORABLE;
      i++;
      points--;
    }
  }
  return points > max ? TEXT_TOO_LONG : TEXT_OK;
}

function fieldName(prefix: string, key: string): string {
  return prefix + (key.length > 128 ? key.slice(0, 128) + '…' : key);
}

// Upper bound of the UTF-8 size of a JSON string: each UTF-16 unit serialises to at most
// 6 bytes (a \uXXXX escape), plus the quotes.
function stringBound(s: string): number {
  return 6 * s.length + 2;
}

// Upper bound of a known field's name, colon and comma, and of a number or boolean value.
const KNOWN_KEY_BOUND = 24;
const SCALAR_BOUND = 24;

/**
 * The hand-written validator of ingest events. It applies every per-event rule of docs/ingest.md
 * in one pass per event, without allocating for events that need no change: `validate` reads
 * each field once through a named step, then applies the rules that span fields (size, time,
 * privacy, pseudonyms). `IngestEventDto` states the same schema declaratively; a property test
 * keeps the two in agreement.
 *
 * One instance serves one request: it collects the response's `errors` and `warnings` (at most
 * `maxIssuesListed` of each) and counts every issue by code.
 */
export class EventValidator {
  readonly errors: EventIssue<EventErrorCode>[] = [];
  readonly warnings: EventIssue<EventWarningCode>[] = [];
  /** Every error by code, listed or not. */
  readonly errorCounts: Partial<Record<EventErrorCode, number>> = {};
  /** Every warning of an accepted event by code, listed or not. */
  readonly warningCounts: Partial<Record<EventWarningCode, number>> = {};
  /** Rejected events by the code of their first error. */
  readonly rejectedByCode: Partial<Record<EventErrorCode, number>> = {};

  private readonly maxListed: number;
  private index = 0;
  private eventId: string | undefined;
  private firstError: EventErrorCode | null = null;
  private eventErrors = 0;
  /** The current event's warnings; they reach the response only if the event is accepted. */
  private readonly pending: EventIssue<EventWarningCode>[] = [];
  /** Known fields present in the current event (not undefined or null). */
  private known = 0;
  /** An upper bound of the current event's serialized size. */
  private bound = 0;

  constructor(private readonly rules: EventRules) {
    this.maxListed = rules.maxIssuesListed ?? Infinity;
  }

  /** Validates event `index`. Returns the normalised event, or null when it is rejected. */
  validate(raw: unknown, index: number): AcceptedEvent | null {
    this.index = index;
    this.firstError = null;
    this.eventErrors = 0;
    if (this.pending.length !== 0) this.pending.length = 0;
    this.eventId = undefined;
    this.known = 0;
    this.bound = 2;
    if (!isPlainObject(raw)) {
      this.error('event', 'invalid_type', 'An event must be a JSON object.');
      return this.reject();
    }
    const ev = raw;
    const rawEventId = ev.eventId;
    if (typeof rawEventId === 'string' && rawEventId.length <= EVENT_LIMITS.identifierMax) {
      this.eventId = rawEventId;
    }
    const { identifierMax, contextMax } = EVENT_LIMITS;
    // Fields are read in a fixed order, which is the order of their errors.
    const eventName = this.readEventName(ev.eventName);
    // The read filters' fields: no control characters.
    const anonymousUserId = this.optionalText(ev.anonymousUserId, 'anonymousUserId', identifierMax, 0, true);
    const sessionId = this.optionalText(ev.sessionId, 'sessionId', identifierMax, 0, true);
    const eventId = this.optionalText(rawEventId, 'eventId', identifierMax, 1, false);
    const eventTime = this.readEventTime(ev.eventTime);
    const isTestMode = this.readTestMode(ev.isTestMode);
    const floatValue = this.readFloatValue(ev.floatValue);
    const platform = this.optionalText(ev.platform, 'platform', contextMax, 0, false);
    const appVersion = this.optionalText(ev.appVersion, 'appVersion', contextMax, 0, false);
    const buildNumber = this.optionalText(ev.buildNumber, 'buildNumber', contextMax, 0, false);
    const osVersion = this.optionalText(ev.osVersion, 'osVersion', contextMax, 0, false);
    const deviceModel = this.optionalText(ev.deviceModel, 'deviceModel', contextMax, 0, false);
    const locale = this.readNormalised('locale', ev.locale, normaliseLocale, 'not a BCP 47 language tag');
    const timezone = this.readNormalised(
      'timezone',
      ev.timezone,
      normaliseTimezone,
      'not an IANA zone name or a ±HH:MM offset',
    );
    const payload = this.readPayload(ev.payload);
    const privacyMode = ev.privacyMode;
    if (this.present(privacyMode) && typeof privacyMode === 'string') this.bound += stringBound(privacyMode);
    this.checkUnknownFields(ev);

    if (this.firstError !== null) return this.reject();
    if (this.bound + this.known * KNOWN_KEY_BOUND > this.rules.maxEventBytes && !this.checkSize(ev)) {
      return this.reject();
    }
    const ts = this.effectiveTime(eventTime);
    if (ts === null) return this.reject();
    const event: AcceptedEvent = {
      index,
      eventId,
      eventName,
      anonymousUserId,
      sessionId,
      eventTime,
      ts,
      isTestMode: this.rules.forceTestMode || isTestMode,
      platform,
      appVersion,
      buildNumber,
      osVersion,
      deviceModel,
      locale,
      timezone,
      floatValue,
      payload,
    };
    // The common event needs none of these steps; the checks keep it from paying for the calls.
    if (privacyMode !== undefined && privacyMode !== null) this.applyPrivacyMode(privacyMode, event);
    if (event.anonymousUserId) {
      this.pseudonymiseUser(event);
      // After the pseudonym: the list holds the id as it would be stored.
      if (this.rules.suppressed && this.rules.suppressed(event.anonymousUserId!)) return this.suppress();
    }
    return this.pending.length === 0 ? event : this.accept(event);
  }

  /**
   * Rejects the event `validate` just accepted, for a rule applied after the field rules (the
   * tracking plan): its warnings leave the response and `issues` become its errors.
   */
  rejectLater(_event: AcceptedEvent, issues: LaterIssue<EventErrorCode>[]): void {
    for (let i = this.pending.length - 1; i >= 0; i--) {
      const issue = this.pending[i];
      const left = this.warningCounts[issue.code]! - 1;
      if (left > 0) this.warningCounts[issue.code] = left;
      else delete this.warningCounts[issue.code];
      if (this.warnings[this.warnings.length - 1] === issue) this.warnings.pop();
    }
    this.pending.length = 0;
    this.firstError = null;
    this.eventErrors = 0;
    for (const { field, code, message } of issues) this.error(field, code, message);
    this.reject();
  }

  /** Adds warnings to the event `validate` just accepted (the tracking plan's, under `flag`). */
  warnLater(event: AcceptedEvent, issues: LaterIssue<EventWarningCode>[]): void {
    this.pending.length = 0;
    for (const { field, code, message } of issues) this.warn(field, code, message);
    this.accept(event);
  }

  /**
   * Adds a warning to an event that was rejected after the field rules (its error stays): what
   * became of it afterwards, such as `quarantine_full`. Counted with the warnings.
   */
  noteRejected(event: AcceptedEvent, issue: LaterIssue<EventWarningCode>): void {
    const { field, code, message } = issue;
    this.warningCounts[code] = (this.warningCounts[code] ?? 0) + 1;
    if (this.warnings.length >= this.maxListed) return;
    const entry: EventIssue<EventWarningCode> = { index: event.index, field, code, message };
    if (event.eventId !== null) entry.eventId = event.eventId;
    this.warnings.push(entry);
  }

  private error(field: string, code: EventErrorCode, message: string): void {
    if (this.firstError === null) this.firstError = code;
    if (++this.eventErrors > MAX_ISSUES_PER_EVENT) return;
    this.errorCounts[code] = (this.errorCounts[code] ?? 0) + 1;
    if (this.errors.length >= this.maxListed) return;
    const issue: EventIssue<EventErrorCode> = { index: this.index, field, code, message };
    if (this.eventId !== undefined) issue.eventId = this.eventId;
    this.errors.push(issue);
  }

  private warn(field: string, code: EventWarningCode, message: string): void {
    if (this.pending.length >= MAX_ISSUES_PER_EVENT) return;
    const issue: EventIssue<EventWarningCode> = { index: this.index, field, code, message };
    if (this.eventId !== undefined) issue.eventId = this.eventId;
    this.pending.push(issue);
  }

  /** Drops the rejected event's warnings: only its errors matter to the client. */
  private reject(): null {
    const code = this.firstError!;
    this.rejectedByCode[code] = (this.rejectedByCode[code] ?? 0) + 1;
    return null;
  }

  private suppress(): null {
    this.error(
      'anonymousUserId',
      'user_suppressed',
      "This user's data was erased; their events are not stored.",
    );
    return this.reject();
  }

  private accept(event: AcceptedEvent): AcceptedEvent {
    for (const issue of this.pending) {
      this.warningCounts[issue.code] = (this.warningCounts[issue.code] ?? 0) + 1;
      if (this.warnings.length < this.maxListed) this.warnings.push(issue);
    }
    return event;
  }

  /** Checks a string field's length and storability; reports and returns false when it breaks a rule. */
  private checkText(field: string, s: string, max: number, rejectControl: boolean): boolean {
    const status = scanText(s, max, rejectControl);
    if (status === TEXT_OK) return true;
    if (status === TEXT_TOO_LONG) this.error(field, 'too_long', `${field} is longer than ${max} characters.`);
    else if (status === TEXT_CONTROL)
      this.error(field, 'invalid_value', `${field} must not contain control characters.`);
    else this.error(field, 'unstorable_value', `${field} contains a NUL character or an unpaired surrogate.`);
    return false;
  }

  /** An optional string field: null when absent, null (and an error) when rejected. */
  private optionalText(v: unknown, field: string, max: number, minLength: number, rejectControl: boolean) {
    if (v === undefined || v === null) return null;
    this.known++;
    if (typeof v !== 'string') {
      this.error(field, 'invalid_type', `${field} must be a string.`);
      return null;
    }
    this.bound += stringBound(v);
    if (v.length < minLength) {
      this.error(field, 'invalid_value', `${field} must not be empty.`);
      return null;
    }
    return this.checkText(field, v, max, rejectControl) ? v : null;
  }

  /** A present optional non-string field: counts it for the unknown-field check and the size bound. */
  private present(v: unknown): boolean {
    if (v === undefined || v === null) return false;
    this.known++;
    this.bound += SCALAR_BOUND;
    return true;
  }

  private readEventName(name: unknown): string {
    if (name === undefined || name === null) {
      this.error('eventName', 'missing_field', 'eventName is required.');
      return '';
    }
    this.known++;
    if (typeof name !== 'string') {
      this.error('eventName', 'invalid_type', 'eventName must be a string.');
      return '';
    }
    this.bound += stringBound(name);
    if (name.length === 0) {
      this.error('eventName', 'invalid_value', 'eventName must not be empty.');
      return '';
    }
    return this.checkText('eventName', name, EVENT_LIMITS.eventNameMax, true) ? name : '';
  }

  private readEventTime(et: unknown): number | null {
    if (!this.present(et)) return null;
    if (typeof et !== 'number') {
      this.error('eventTime', 'invalid_type', 'eventTime must be an integer of epoch milliseconds.');
    } else if (!Number.isSafeInteger(et) || et < 0) {
      this.error(
        'eventTime',
        'invalid_value',
        'eventTime must be a whole number of epoch milliseconds, at least 0.',
      );
    } else {
      return et;
    }
    return null;
  }

  private readTestMode(tm: unknown): boolean {
    if (!this.present(tm)) return false;
    if (typeof tm === 'boolean') return tm;
    this.error('isTestMode', 'invalid_type', 'isTestMode must be a boolean.');
    return false;
  }

  private readFloatValue(fv: unknown): number | null {
    if (!this.present(fv)) return null;
    if (typeof fv !== 'number') this.error('floatValue', 'invalid_type', 'floatValue must be a number.');
    else if (!Number.isFinite(fv)) this.error('floatValue', 'invalid_value', 'floatValue must be finite.');
    else return fv;
    return null;
  }

  // A bad locale or time zone format drops the field and keeps the event.
  private readNormalised(
    field: 'locale' | 'timezone',
    value: unknown,
    normalise: (text: string) => string | null,
    unrecognised: string,
  ): string | null {
    if (!this.present(value)) return null;
    if (typeof value !== 'string') {
      this.error(field, 'invalid_type', `${field} must be a string.`);
      return null;
    }
    this.bound += stringBound(value);
    const normalised = normalise(value);
    if (normalised === null) this.warn(field, 'invalid_format', `${field} is ${unrecognised}; dropped.`);
    return normalised;
  }

  private readPayload(p: unknown): Payload | null {
    if (!this.present(p)) return null;
    if (isPlainObject(p)) return this.checkPayload(p);
    this.error('payload', 'invalid_type', 'payload must be a JSON object.');
    return null;
  }

  /**
   * Fields not read above. Counting keys is cheap; the loop that names them runs only when the
   * count shows there are some.
   */
  private checkUnknownFields(ev: Raw): void {
    let keys = 0;
    for (const _key in ev) keys++;
    if (keys !== this.known) this.unknownFields(ev);
  }

  /**
   * The event's exact serialized size, measured when the bound says it might be over the limit.
   * The measure uses no recursion, so an unknown field nested thousands of levels deep is just
   * a large event.
   */
  private checkSize(ev: Raw): boolean {
    const { maxEventBytes } = this.rules;
    if (jsonByteLength(ev, maxEventBytes) <= maxEventBytes) return true;
    this.error('event', 'event_too_large', `The event is larger than the limit of ${maxEventBytes} bytes.`);
    return false;
  }

  /**
   * The effective time: the client clock correction, then the future clamp and the age limit.
   * Null when the event is too old.
   */
  private effectiveTime(eventTime: number | null): number | null {
    const { receivedAt, skewMs } = this.rules;
    if (eventTime === null) return receivedAt;
    let ts = eventTime;
    if (skewMs !== 0) {
      ts += skewMs;
      this.warn(
        'eventTime',
        'clock_skew_corrected',
        `eventTime corrected by ${skewMs} ms for the client clock.`,
      );
    }
    if (ts > receivedAt + FUTURE_TOLERANCE_MS) {
      ts = receivedAt;
      this.warn('eventTime', 'future_time_clamped', 'eventTime is in the future; the receive time is used.');
    } else if (ts < this.rules.oldestTs) {
      const days = Math.round((this.rules.receivedAt - this.rules.oldestTs) / 86_400_000);
      this.error(
        'eventTime',
        'event_too_old',
        `The event is older than ${days} days, the accepted age (INGEST_MAX_EVENT_AGE_DAYS).`,
      );
      return null;
    }
    return ts;
  }

  /** privacyMode "unlinked": the event must not be linkable to a person. */
  private applyPrivacyMode(privacyMode: unknown, event: AcceptedEvent): void {
    if (privacyMode === 'unlinked') {
      this.warn('privacyMode', 'unlinked', 'Unlinked event: anonymousUserId and sessionId are not stored.');
      event.anonymousUserId = null;
      event.sessionId = null;
    } else {
      this.warn('privacyMode', 'ignored_field', 'privacyMode supports only "unlinked"; ignored.');
    }
  }

  /** An email address or phone number as the user id is replaced by a keyed hash. */
  private pseudonymiseUser(event: AcceptedEvent): void {
    const id = event.anonymousUserId;
    if (!id) return;
    const kind = identifierKind(id);
    if (!kind) return;
    event.anonymousUserId = this.rules.pseudonymise(kind, id);
    this.warn(
      'anonymousUserId',
      'pii_pseudonymised',
      `anonymousUserId looked like ${kind === 'email' ? 'an email address' : 'a phone number'}; stored as a keyed hash.`,
    );
  }

  /** Warns about each unknown field, and adds its share to the size bound. */
  private unknownFields(ev: Raw): void {
    for (const key in ev) {
      const v = ev[key];
      if (KNOWN_FIELDS.has(key)) {
        // A known field sent as null was not counted; it serializes to a few bytes.
        if (v === null) this.bound += KNOWN_KEY_BOUND;
        continue;
      }
      this.warn(fieldName('', key), 'ignored_field', 'Unknown field, ignored.');
      this.bound += stringBound(key) + 2;
      if (typeof v === 'string') this.bound += stringBound(v);
      // Anything nested is measured exactly.
      else if (typeof v === 'object' && v !== null) this.bound = Infinity;
      else this.bound += SCALAR_BOUND;
    }
  }

  private checkPayload(p: Raw): Payload | null {
    const { payloadMaxKeys, payloadKeyMax, payloadStringMax } = EVENT_LIMITS;
    const policy = this.rules.piiPolicy;
    let count = 0;
    let bound = 2;
    // Keys whose value is replaced (REDACTED) or dropped (undefined); null while nothing changes.
    let changes: Map<string, string | undefined> | null = null;
    for (const key in p) {
      if (++count > payloadMaxKeys) {
        this.error('payload', 'too_many_keys', `payload has more than ${payloadMaxKeys} keys.`);
        return null;
      }
      bound += stringBound(key) + 2;
      if (key.length === 0) {
        this.error('payload', 'invalid_value', 'payload keys must not be empty.');
      } else {
        const status = scanText(key, payloadKeyMax, false);
        if (status === TEXT_TOO_LONG) {
          this.error(
            fieldName('payload.', key),
            'too_long',
            `payload keys are at most ${payloadKeyMax} characters.`,
          );
        } else if (status !== TEXT_OK) {
          this.error(
            fieldName('payload.', key),
            'unstorable_value',
            'payload key contains a NUL character or an unpaired surrogate.',
          );
        }
      }
      const v = p[key];
      if (typeof v === 'string') {
        bound += stringBound(v);
        if (!this.checkText(fieldName('payload.', key), v, payloadStringMax, false)) continue;
        if (policy !== 'allow' && detectPii(v) !== null) {
          if (policy === 'reject') {
            this.error(
              fieldName('payload.', key),
              'pii_detected',
              'Looks like an email address, phone number or card number.',
            );
          } else {
            (changes ??= new Map()).set(key, REDACTED);
            this.warn(
              fieldName('payload.', key),
              'pii_redacted',
              'Looked like an email address, phone number or card number; replaced.',
            );
          }
        }
      } else if (typeof v === 'number') {
        bound += SCALAR_BOUND;
        if (!Number.isFinite(v))
          this.error(fieldName('payload.', key), 'invalid_value', 'payload numbers must be finite.');
      } else if (typeof v === 'boolean') {
        bound += SCALAR_BOUND;
      } else if (v === null) {
        bound += SCALAR_BOUND;
        (changes ??= new Map()).set(key, undefined);
        this.warn(fieldName('payload.', key), 'null_value_dropped', 'null payload value dropped.');
      } else {
        this.error(
          fieldName('payload.', key),
          'nested_value',
          'payload values must be a string, a number or a boolean.',
        );
      }
    }
    this.bound += bound;
    if (!changes) return p as Payload;
    // A null-prototype copy, so that keys such as "__proto__" stay plain data.
    const out = Object.create(null) as Payload;
    for (const key in p) {
      if (!changes.has(key)) out[key] = p[key] as PayloadValue;
      else {
        const replacement = changes.get(key);
        if (replacement !== undefined) out[key] = replacement;
      }
    }
    return out;
  }
}
