import { normaliseLocale, normaliseTimezone } from './context-formats';
import { EVENT_LIMITS, FUTURE_TOLERANCE_MS, MAX_ISSUES_PER_EVENT, REDACTED } from './ingest.limits';
import type {
  AcceptedEvent,
  EventErrorCode,
  EventIssue,
  EventWarningCode,
  Payload,
  PayloadValue,
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
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f)) {
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
  /** Known fields present in the current event (not undefined or null). */
  private known = 0;
  /** An upper bound of the current event's serialized size. */
  private bound = 0;

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
    const status = scanText(s, max, false);
    if (status === TEXT_OK) return true;
    if (status === TEXT_TOO_LONG) this.error(field, 'too_long', `${field} is longer than ${max} characters.`);
    else this.error(field, 'unstorable_value', `${field} contains a NUL character or an unpaired surrogate.`);
    return false;
  }

  /** An optional string field: null when absent (or null), undefined when rejected. */
  private optionalText(v: unknown, field: string, max: number, minLength = 0): string | null | undefined {
    if (v === undefined || v === null) return null;
    this.known++;
    if (typeof v !== 'string') {
      this.error(field, 'invalid_type', `${field} must be a string.`);
      return undefined;
    }
    this.bound += stringBound(v);
    if (v.length < minLength) {
      this.error(field, 'invalid_value', `${field} must not be empty.`);
      return undefined;
    }
    return this.checkText(field, v, max) ? v : undefined;
  }

  /** A present optional non-string field: counts it for the unknown-field check and the size bound. */
  private present(v: unknown): boolean {
    if (v === undefined || v === null) return false;
    this.known++;
    this.bound += SCALAR_BOUND;
    return true;
  }

  /** Validates event `index`. Returns the normalised event, or null when it is rejected. */
  validate(raw: unknown, index: number): AcceptedEvent | null {
    this.index = index;
    this.failed = false;
    this.eventErrors = 0;
    this.eventWarnings = 0;
    this.warningsStart = this.warnings.length;
    this.eventId = undefined;
    this.known = 0;
    this.bound = 2;

    if (!isPlainObject(raw)) {
      this.error('event', 'invalid_type', 'An event must be a JSON object.');
      return null;
    }
    const ev = raw;
    const rawEventId = ev.eventId;
    if (typeof rawEventId === 'string' && rawEventId.length <= EVENT_LIMITS.identifierMax) {
      this.eventId = rawEventId;
    }

    let eventName = '';
    const name = ev.eventName;
    if (name === undefined || name === null) {
      this.error('eventName', 'missing_field', 'eventName is required.');
    } else if (typeof name !== 'string') {
      this.known++;
      this.error('eventName', 'invalid_type', 'eventName must be a string.');
    } else {
      this.known++;
      this.bound += stringBound(name);
      const status = scanText(name, EVENT_LIMITS.eventNameMax, true);
      if (name.length === 0) {
        this.error('eventName', 'invalid_value', 'eventName must not be empty.');
      } else if (status === TEXT_CONTROL) {
        this.error('eventName', 'invalid_value', 'eventName must not contain control characters.');
      } else if (status === TEXT_TOO_LONG) {
        this.error(
          'eventName',
          'too_long',
          `eventName is longer than ${EVENT_LIMITS.eventNameMax} characters.`,
        );
      } else if (status === TEXT_UNSTORABLE) {
        this.error(
          'eventName',
          'unstorable_value',
          'eventName contains a NUL character or an unpaired surrogate.',
        );
      } else {
        eventName = name;
      }
    }

    const { identifierMax, contextMax } = EVENT_LIMITS;
    let anonymousUserId = this.optionalText(ev.anonymousUserId, 'anonymousUserId', identifierMax);
    let sessionId = this.optionalText(ev.sessionId, 'sessionId', identifierMax);
    const eventId = this.optionalText(rawEventId, 'eventId', identifierMax, 1);

    let eventTime: number | null = null;
    const et = ev.eventTime;
    if (this.present(et)) {
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
    if (this.present(tm)) {
      if (typeof tm !== 'boolean') this.error('isTestMode', 'invalid_type', 'isTestMode must be a boolean.');
      else isTestMode = tm;
    }

    let floatValue: number | null = null;
    const fv = ev.floatValue;
    if (this.present(fv)) {
      if (typeof fv !== 'number') this.error('floatValue', 'invalid_type', 'floatValue must be a number.');
      else if (!Number.isFinite(fv)) this.error('floatValue', 'invalid_value', 'floatValue must be finite.');
      else floatValue = fv;
    }

    const platform = this.optionalText(ev.platform, 'platform', contextMax);
    const appVersion = this.optionalText(ev.appVersion, 'appVersion', contextMax);
    const buildNumber = this.optionalText(ev.buildNumber, 'buildNumber', contextMax);
    const osVersion = this.optionalText(ev.osVersion, 'osVersion', contextMax);
    const deviceModel = this.optionalText(ev.deviceModel, 'deviceModel', contextMax);

    // A bad locale or time zone format drops the field and keeps the event.
    let locale: string | null = null;
    const lc = ev.locale;
    if (this.present(lc)) {
      if (typeof lc !== 'string') this.error('locale', 'invalid_type', 'locale must be a string.');
      else {
        this.bound += stringBound(lc);
        locale = normaliseLocale(lc);
        if (locale === null)
          this.warn('locale', 'invalid_format', 'locale is not a BCP 47 language tag; dropped.');
      }
    }
    let timezone: string | null = null;
    const tz = ev.timezone;
    if (this.present(tz)) {
      if (typeof tz !== 'string') this.error('timezone', 'invalid_type', 'timezone must be a string.');
      else {
        this.bound += stringBound(tz);
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
    if (this.present(p)) {
      if (!isPlainObject(p)) this.error('payload', 'invalid_type', 'payload must be a JSON object.');
      else payload = this.checkPayload(p);
    }

    const privacyMode = ev.privacyMode;
    if (this.present(privacyMode) && typeof privacyMode === 'string') this.bound += stringBound(privacyMode);

    // Fields not read above. Counting keys is cheap; the loop that names them runs only when
    // the count shows there are some.
    let keys = 0;
    for (const _key in ev) keys++;
    if (keys !== this.known) this.unknownFields(ev);

    if (this.failed) return this.reject();

    const { maxEventBytes } = this.rules;
    if (this.bound + this.known * KNOWN_KEY_BOUND > maxEventBytes) {
      const size = Buffer.byteLength(JSON.stringify(ev), 'utf8');
      if (size > maxEventBytes) {
        this.error('event', 'event_too_large', `The event is ${size} bytes; the limit is ${maxEventBytes}.`);
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

  /** Drops the rejected event's warnings: only its errors matter to the client. */
  private reject(): null {
    this.warnings.length = this.warningsStart;
    return null;
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
        if (!this.checkText(fieldName('payload.', key), v, payloadStringMax)) continue;
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
