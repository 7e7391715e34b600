import { normaliseLocale, normaliseTimezone } from './context-formats';
import { EVENT_LIMITS, FUTURE_TOLERANCE_MS, MAX_ISSUES_PER_EVENT, REDACTED } from './ingest.limits';
import type {
  AcceptedEvent,
  EventErrorCode,
  EventIssue,
  EventWarningCode,
  Payload,
  PiiPolicy,
} from './ingest.types';
import { detectPii, identifierKind } from './pii';

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

// Cc: the C0 and C1 control characters and DEL.
const CONTROL_CHAR = /\p{Cc}/u;

type Raw = Record<string, unknown>;

function isPlainObject(v: unknown): v is Raw {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isWellFormed(s: string): boolean {
  return (s as unknown as { isWellFormed(): boolean }).isWellFormed();
}

/** PostgreSQL refuses NUL in text and jsonb, and unpaired surrogates in jsonb. */
export function isStorableText(s: string): boolean {
  return s.indexOf('\u0000') === -1 && isWellFormed(s);
}

/** True when `s` has more than `max` code points; cheap when its UTF-16 length already decides. */
export function exceedsCodePoints(s: string, max: number): boolean {
  if (s.length <= max) return false;
  if (s.length > 2 * max) return true;
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    // Count a high surrogate followed by a low one once.
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    if (++n > max) return true;
  }
  return false;
}

function fieldName(prefix: string, key: string): string {
  return prefix + (key.length > 128 ? key.slice(0, 128) + '…' : key);
}

// Upper bound of the UTF-8 size of a JSON string: each UTF-16 unit serialises to at most
// 6 bytes (a \uXXXX escape), plus the quotes.
function stringBound(s: string): number {
  return 6 * s.length + 2;
}

/**
 * The hand-written validator of ingest events. It applies every per-event rule of decisions §4
 * in one pass per event, without allocating for events that need no change. `IngestEventDto`
 * states the same schema declaratively; a property test keeps the two in agreement.
 *
 * One instance serves one request: it collects the response's `errors` and `warnings`.
 */
export class EventValidator {
  readonly errors: EventIssue<EventErrorCode>[] = [];
  readonly warnings: EventIssue<EventWarningCode>[] = [];

  private index = 0;
  private eventId: string | undefined;
  private failed = false;
  private eventErrors = 0;
  private eventWarnings = 0;
  private warningsStart = 0;

  constructor(private readonly rules: EventRules) {}

  private error(field: string, code: EventErrorCode, message: string): void {
    this.failed = true;
    if (++this.eventErrors > MAX_ISSUES_PER_EVENT) return;
    const issue: EventIssue<EventErrorCode> = { index: this.index, field, code, message };
    if (this.eventId !== undefined) issue.eventId = this.eventId;
    this.errors.push(issue);
  }

  private warn(field: string, code: EventWarningCode, message: string): void {
    if (++this.eventWarnings > MAX_ISSUES_PER_EVENT) return;
    const issue: EventIssue<EventWarningCode> = { index: this.index, field, code, message };
    if (this.eventId !== undefined) issue.eventId = this.eventId;
    this.warnings.push(issue);
  }

  /** Checks a string field; reports and returns false when it breaks a rule. */
  private checkText(field: string, s: string, max: number): boolean {
    if (exceedsCodePoints(s, max)) {
      this.error(field, 'too_long', `${field} is longer than ${max} characters.`);
      return false;
    }
    if (!isStorableText(s)) {
      this.error(field, 'unstorable_value', `${field} contains a NUL character or an unpaired surrogate.`);
      return false;
    }
    return true;
  }

  /** An optional string field: null when absent (or null), undefined when rejected. */
  private optionalText(ev: Raw, field: string, max: number, minLength = 0): string | null | undefined {
    const v = ev[field];
    if (v === undefined || v === null) return null;
    if (typeof v !== 'string') {
      this.error(field, 'invalid_type', `${field} must be a string.`);
      return undefined;
    }
    if (v.length < minLength) {
      this.error(field, 'invalid_value', `${field} must not be empty.`);
      return undefined;
    }
    return this.checkText(field, v, max) ? v : undefined;
  }

  /** Validates event `index`. Returns the normalised event, or null when it is rejected. */
  validate(raw: unknown, index: number): AcceptedEvent | null {
    this.index = index;
    this.failed = false;
    this.eventErrors = 0;
    this.eventWarnings = 0;
    this.warningsStart = this.warnings.length;
    this.eventId = undefined;

    if (!isPlainObject(raw)) {
      this.error('event', 'invalid_type', 'An event must be a JSON object.');
      return null;
    }
    const ev = raw;
    const rawEventId = ev.eventId;
    if (typeof rawEventId === 'string' && rawEventId.length <= EVENT_LIMITS.identifierMax) {
      this.eventId = rawEventId;
    }

    // Unknown fields, and a size bound for the serialized event.
    let bound = 2;
    for (const key in ev) {
      const v = ev[key];
      bound += stringBound(key) + 2;
      if (typeof v === 'string') bound += stringBound(v);
      else if (typeof v === 'object' && v !== null) {
        // The payload's share is added below; anything else nested is measured exactly.
        if (key !== 'payload') bound = Infinity;
      } else bound += 24;
      if (!KNOWN_FIELDS.has(key)) {
        this.warn(fieldName('', key), 'ignored_field', 'Unknown field, ignored.');
      }
    }

    // eventName
    let eventName = '';
    const name = ev.eventName;
    if (name === undefined || name === null) {
      this.error('eventName', 'missing_field', 'eventName is required.');
    } else if (typeof name !== 'string') {
      this.error('eventName', 'invalid_type', 'eventName must be a string.');
    } else if (name.length === 0) {
      this.error('eventName', 'invalid_value', 'eventName must not be empty.');
    } else if (CONTROL_CHAR.test(name)) {
      this.error('eventName', 'invalid_value', 'eventName must not contain control characters.');
    } else if (this.checkText('eventName', name, EVENT_LIMITS.eventNameMax)) {
      eventName = name;
    }

    let anonymousUserId = this.optionalText(ev, 'anonymousUserId', EVENT_LIMITS.identifierMax);
    let sessionId = this.optionalText(ev, 'sessionId', EVENT_LIMITS.identifierMax);
    const eventId = this.optionalText(ev, 'eventId', EVENT_LIMITS.identifierMax, 1);

    let eventTime: number | null = null;
    const et = ev.eventTime;
    if (et !== undefined && et !== null) {
      if (typeof et !== 'number') {
        this.error('eventTime', 'invalid_type', 'eventTime must be an integer of epoch milliseconds.');
      } else if (!Number.isSafeInteger(et) || et < 0) {
        this.error(
          'eventTime',
          'invalid_value',
          'eventTime must be a whole number of epoch milliseconds, at least 0.',
        );
      } else {
        eventTime = et;
      }
    }

    let isTestMode = false;
    const tm = ev.isTestMode;
    if (tm !== undefined && tm !== null) {
      if (typeof tm !== 'boolean') this.error('isTestMode', 'invalid_type', 'isTestMode must be a boolean.');
      else isTestMode = tm;
    }

    let floatValue: number | null = null;
    const fv = ev.floatValue;
    if (fv !== undefined && fv !== null) {
      if (typeof fv !== 'number') this.error('floatValue', 'invalid_type', 'floatValue must be a number.');
      else if (!Number.isFinite(fv)) this.error('floatValue', 'invalid_value', 'floatValue must be finite.');
      else floatValue = fv;
    }

    const platform = this.optionalText(ev, 'platform', EVENT_LIMITS.contextMax);
    const appVersion = this.optionalText(ev, 'appVersion', EVENT_LIMITS.contextMax);
    const buildNumber = this.optionalText(ev, 'buildNumber', EVENT_LIMITS.contextMax);
    const osVersion = this.optionalText(ev, 'osVersion', EVENT_LIMITS.contextMax);
    const deviceModel = this.optionalText(ev, 'deviceModel', EVENT_LIMITS.contextMax);

    // A bad locale or time zone format drops the field and keeps the event.
    let locale: string | null = null;
    const lc = ev.locale;
    if (lc !== undefined && lc !== null) {
      if (typeof lc !== 'string') this.error('locale', 'invalid_type', 'locale must be a string.');
      else {
        locale = normaliseLocale(lc);
        if (locale === null)
          this.warn('locale', 'invalid_format', 'locale is not a BCP 47 language tag; dropped.');
      }
    }
    let timezone: string | null = null;
    const tz = ev.timezone;
    if (tz !== undefined && tz !== null) {
      if (typeof tz !== 'string') this.error('timezone', 'invalid_type', 'timezone must be a string.');
      else {
        timezone = normaliseTimezone(tz);
        if (timezone === null) {
          this.warn(
            'timezone',
            'invalid_format',
            'timezone is not an IANA zone name or a ±HH:MM offset; dropped.',
          );
        }
      }
    }

    let payload: Payload | null = null;
    const p = ev.payload;
    if (p !== undefined && p !== null) {
      if (!isPlainObject(p)) {
        this.error('payload', 'invalid_type', 'payload must be a JSON object.');
      } else {
        const checked = this.checkPayload(p);
        payload = checked.payload;
        bound += checked.bound;
      }
    }

    if (this.failed) return this.reject();

    if (bound > this.rules.maxEventBytes) {
      const size = Buffer.byteLength(JSON.stringify(ev), 'utf8');
      if (size > this.rules.maxEventBytes) {
        this.error(
          'event',
          'event_too_large',
          `The event is ${size} bytes; the limit is ${this.rules.maxEventBytes}.`,
        );
        return this.reject();
      }
    }

    // Time: the client clock correction, then the future clamp and the age limit.
    const { receivedAt } = this.rules;
    let ts = receivedAt;
    if (eventTime !== null) {
      ts = eventTime;
      if (this.rules.skewMs !== 0) {
        ts += this.rules.skewMs;
        this.warn(
          'eventTime',
          'clock_skew_corrected',
          `eventTime corrected by ${this.rules.skewMs} ms for the client clock.`,
        );
      }
      if (ts > receivedAt + FUTURE_TOLERANCE_MS) {
        ts = receivedAt;
        this.warn(
          'eventTime',
          'future_time_clamped',
          'eventTime is in the future; the receive time is used.',
        );
      } else if (ts < this.rules.oldestTs) {
        this.error('eventTime', 'event_too_old', 'The event is older than the accepted age.');
        return this.reject();
      }
    }

    // privacyMode "unlinked": the event must not be linkable to a person.
    const privacyMode = ev.privacyMode;
    if (privacyMode !== undefined && privacyMode !== null) {
      if (privacyMode === 'unlinked') {
        this.warn('privacyMode', 'unlinked', 'Unlinked event: anonymousUserId and sessionId are not stored.');
        anonymousUserId = null;
        sessionId = null;
      } else {
        this.warn('privacyMode', 'ignored_field', 'privacyMode supports only "unlinked"; ignored.');
      }
    }

    if (anonymousUserId) {
      const kind = identifierKind(anonymousUserId);
      if (kind) {
        anonymousUserId = this.rules.pseudonymise(kind, anonymousUserId);
        this.warn(
          'anonymousUserId',
          'pii_pseudonymised',
          `anonymousUserId looked like ${kind === 'email' ? 'an email address' : 'a phone number'}; stored as a keyed hash.`,
        );
      }
    }

    return {
      index,
      eventId: eventId as string | null,
      eventName,
      anonymousUserId: anonymousUserId as string | null,
      sessionId: sessionId as string | null,
      eventTime,
      ts,
      isTestMode: this.rules.forceTestMode || isTestMode,
      platform: platform as string | null,
      appVersion: appVersion as string | null,
      buildNumber: buildNumber as string | null,
      osVersion: osVersion as string | null,
      deviceModel: deviceModel as string | null,
      locale,
      timezone,
      floatValue,
      payload,
    };
  }

  /** Drops the rejected event's warnings: only its errors matter to the client. */
  private reject(): null {
    this.warnings.length = this.warningsStart;
    return null;
  }

  private checkPayload(p: Raw): { payload: Payload | null; bound: number } {
    const { payloadMaxKeys, payloadKeyMax, payloadStringMax } = EVENT_LIMITS;
    const policy = this.rules.piiPolicy;
    let count = 0;
    let bound = 2;
    // Keys whose value is replaced (REDACTED) or dropped (undefined); null while nothing changes.
    let changes: Map<string, string | undefined> | null = null;
    for (const key in p) {
      if (++count > payloadMaxKeys) {
        this.error('payload', 'too_many_keys', `payload has more than ${payloadMaxKeys} keys.`);
        return { payload: null, bound };
      }
      const field = fieldName('payload.', key);
      bound += stringBound(key) + 2;
      if (key.length === 0) {
        this.error('payload', 'invalid_value', 'payload keys must not be empty.');
      } else if (exceedsCodePoints(key, payloadKeyMax)) {
        this.error(field, 'too_long', `payload keys are at most ${payloadKeyMax} characters.`);
      } else if (!isStorableText(key)) {
        this.error(
          field,
          'unstorable_value',
          'payload key contains a NUL character or an unpaired surrogate.',
        );
      }
      const v = p[key];
      if (typeof v === 'string') {
        bound += stringBound(v);
        if (!this.checkText(field, v, payloadStringMax)) continue;
        if (policy !== 'allow' && detectPii(v) !== null) {
          if (policy === 'reject') {
            this.error(field, 'pii_detected', 'Looks like an email address, phone number or card number.');
          } else {
            (changes ??= new Map()).set(key, REDACTED);
            this.warn(
              field,
              'pii_redacted',
              'Looked like an email address, phone number or card number; replaced.',
            );
          }
        }
      } else if (typeof v === 'number') {
        bound += 24;
        if (!Number.isFinite(v)) this.error(field, 'invalid_value', 'payload numbers must be finite.');
      } else if (typeof v === 'boolean') {
        bound += 5;
      } else if (v === null) {
        bound += 4;
        (changes ??= new Map()).set(key, undefined);
        this.warn(field, 'null_value_dropped', 'null payload value dropped.');
      } else {
        this.error(field, 'nested_value', 'payload values must be a string, a number or a boolean.');
      }
    }
    if (!changes) return { payload: p as Payload, bound };
    // A null-prototype copy, so that keys such as "__proto__" stay plain data.
    const out = Object.create(null) as Payload;
    for (const key in p) {
      if (!changes.has(key)) out[key] = p[key] as string | number | boolean;
      else {
        const replacement = changes.get(key);
        if (replacement !== undefined) out[key] = replacement;
      }
    }
    return { payload: out, bound };
  }
}
