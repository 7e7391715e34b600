import { SENT_FIELD_NAMES } from '@app/common/events/event-fields';
import { normaliseLocale, normaliseTimezone } from './context-formats';
import { EventIssues, type LaterIssue } from './event-issues';
import { EVENT_LIMITS } from './ingest.limits';
import type { AcceptedEvent, EventErrorCode, EventWarningCode, Payload } from './ingest.types';
import type { EventRules } from './event-rules';
import { jsonByteLength } from './json-size';
import { PayloadRules } from './payload-rules';
import { TimeAndIdentity } from './time-and-identity';
import { KNOWN_KEY_BOUND, SCALAR_BOUND, fieldName, stringBound } from './text-rules';

export type { LaterIssue } from './event-issues';
export type { EventRules } from './event-rules';
export { scanText, TEXT_CONTROL, TEXT_OK, TEXT_TOO_LONG, TEXT_UNSTORABLE } from './text-rules';

// The fields an event may carry (EVENT_FIELDS), and privacyMode, which is read but not stored.
const KNOWN_FIELDS = new Set<string>([...SENT_FIELD_NAMES, 'privacyMode']);

type Raw = Record<string, unknown>;

function isPlainObject(v: unknown): v is Raw {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * The hand-written validator of ingest events. It applies every per-event rule of docs/ingest.md
 * in one pass per event, without allocating for events that need no change: `validate` reads
 * each field once through a named step (the field checks here, the payload's in PayloadRules),
 * then applies the rules that span fields: size, then time and identity (TimeAndIdentity: clock
 * skew, age, privacy mode, the PII pseudonym, suppressions). `IngestEventDto` states the same
 * schema declaratively; a property test keeps the two in agreement.
 *
 * One instance serves one request; its issues and their counts are kept by EventIssues.
 */
export class EventValidator {
  private readonly issues: EventIssues;
  private readonly payloads: PayloadRules;
  private readonly steps: TimeAndIdentity;
  /** Known fields present in the current event (not undefined or null). */
  private known = 0;
  /** An upper bound of the current event's serialized size. */
  private bound = 0;

  constructor(private readonly rules: EventRules) {
    this.issues = new EventIssues(rules.maxIssuesListed ?? Infinity);
    this.payloads = new PayloadRules(this.issues, rules.piiPolicy);
    this.steps = new TimeAndIdentity(this.issues, rules);
  }

  get errors() {
    return this.issues.errors;
  }
  get warnings() {
    return this.issues.warnings;
  }
  /** Every error by code, listed or not. */
  get errorCounts() {
    return this.issues.errorCounts;
  }
  /** Every warning of an accepted event by code, listed or not. */
  get warningCounts() {
    return this.issues.warningCounts;
  }
  /** Rejected events by the code of their first error. */
  get rejectedByCode() {
    return this.issues.rejectedByCode;
  }

  /** Validates event `index`. Returns the normalised event, or null when it is rejected. */
  validate(raw: unknown, index: number): AcceptedEvent | null {
    const issues = this.issues;
    issues.begin(index);
    this.known = 0;
    this.bound = 2;
    if (!isPlainObject(raw)) {
      issues.error('event', 'invalid_type', 'An event must be a JSON object.');
      return issues.reject();
    }
    const rawEventId = raw.eventId;
    if (typeof rawEventId === 'string' && rawEventId.length <= EVENT_LIMITS.identifierMax) {
      issues.nameEvent(rawEventId);
    }
    const event = this.readFields(raw, index);
    this.checkUnknownFields(raw);
    if (issues.firstError !== null) return issues.reject();
    if (this.bound + this.known * KNOWN_KEY_BOUND > this.rules.maxEventBytes && !this.checkSize(raw)) {
      return issues.reject();
    }
    return this.steps.apply(event, raw.privacyMode);
  }

  /**
   * Rejects the event `validate` just accepted, for a rule applied after the field rules (the
   * tracking plan): its warnings leave the response and `issues` become its errors.
   */
  rejectLater(_event: AcceptedEvent, issues: LaterIssue<EventErrorCode>[]): void {
    this.issues.rejectLater(issues);
  }

  /** Adds warnings to the event `validate` just accepted (the tracking plan's, under `flag`). */
  warnLater(event: AcceptedEvent, issues: LaterIssue<EventWarningCode>[]): void {
    this.issues.warnLater(event, issues);
  }

  /**
   * Adds a warning to an event that was rejected after the field rules (its error stays): what
   * became of it afterwards, such as `quarantine_full`. Counted with the warnings.
   */
  noteRejected(event: AcceptedEvent, issue: LaterIssue<EventWarningCode>): void {
    this.issues.noteRejected(event, issue);
  }

  /** Reads every field in a fixed order, which is the order of their errors; `ts` is set later. */
  private readFields(ev: Raw, index: number): AcceptedEvent {
    const { identifierMax, contextMax } = EVENT_LIMITS;
    const eventName = this.readEventName(ev.eventName);
    // The read filters' fields: no control characters.
    const anonymousUserId = this.optionalText(ev.anonymousUserId, 'anonymousUserId', identifierMax, 0, true);
    const sessionId = this.optionalText(ev.sessionId, 'sessionId', identifierMax, 0, true);
    const eventId = this.optionalText(ev.eventId, 'eventId', identifierMax, 1, false);
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
    return {
      index,
      eventId,
      eventName,
      anonymousUserId,
      sessionId,
      eventTime,
      ts: 0,
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
  }

  /** An optional string field: null when absent, null (and an error) when rejected. */
  private optionalText(v: unknown, field: string, max: number, minLength: number, rejectControl: boolean) {
    if (v === undefined || v === null) return null;
    this.known++;
    if (typeof v !== 'string') {
      this.issues.error(field, 'invalid_type', `${field} must be a string.`);
      return null;
    }
    this.bound += stringBound(v);
    if (v.length < minLength) {
      this.issues.error(field, 'invalid_value', `${field} must not be empty.`);
      return null;
    }
    return this.issues.checkText(field, v, max, rejectControl) ? v : null;
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
      this.issues.error('eventName', 'missing_field', 'eventName is required.');
      return '';
    }
    this.known++;
    if (typeof name !== 'string') {
      this.issues.error('eventName', 'invalid_type', 'eventName must be a string.');
      return '';
    }
    this.bound += stringBound(name);
    if (name.length === 0) {
      this.issues.error('eventName', 'invalid_value', 'eventName must not be empty.');
      return '';
    }
    return this.issues.checkText('eventName', name, EVENT_LIMITS.eventNameMax, true) ? name : '';
  }

  private readEventTime(et: unknown): number | null {
    if (!this.present(et)) return null;
    if (typeof et !== 'number') {
      this.issues.error('eventTime', 'invalid_type', 'eventTime must be an integer of epoch milliseconds.');
    } else if (!Number.isSafeInteger(et) || et < 0) {
      this.issues.error(
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
    this.issues.error('isTestMode', 'invalid_type', 'isTestMode must be a boolean.');
    return false;
  }

  private readFloatValue(fv: unknown): number | null {
    if (!this.present(fv)) return null;
    if (typeof fv !== 'number')
      this.issues.error('floatValue', 'invalid_type', 'floatValue must be a number.');
    else if (!Number.isFinite(fv))
      this.issues.error('floatValue', 'invalid_value', 'floatValue must be finite.');
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
      this.issues.error(field, 'invalid_type', `${field} must be a string.`);
      return null;
    }
    this.bound += stringBound(value);
    const normalised = normalise(value);
    if (normalised === null)
      this.issues.warn(field, 'invalid_format', `${field} is ${unrecognised}; dropped.`);
    return normalised;
  }

  private readPayload(p: unknown): Payload | null {
    if (!this.present(p)) return null;
    if (!isPlainObject(p)) {
      this.issues.error('payload', 'invalid_type', 'payload must be a JSON object.');
      return null;
    }
    const payload = this.payloads.check(p);
    this.bound += this.payloads.bound;
    return payload;
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

  /** Warns about each unknown field, and adds its share to the size bound. */
  private unknownFields(ev: Raw): void {
    for (const key in ev) {
      const v = ev[key];
      if (KNOWN_FIELDS.has(key)) {
        // A known field sent as null was not counted; it serializes to a few bytes.
        if (v === null) this.bound += KNOWN_KEY_BOUND;
        continue;
      }
      this.issues.warn(fieldName('', key), 'ignored_field', 'Unknown field, ignored.');
      this.bound += stringBound(key) + 2;
      if (typeof v === 'string') this.bound += stringBound(v);
      // Anything nested is measured exactly.
      else if (typeof v === 'object' && v !== null) this.bound = Infinity;
      else this.bound += SCALAR_BOUND;
    }
  }

  /**
   * The event's exact serialized size, measured when the bound says it might be over the limit.
   * The measure uses no recursion, so an unknown field nested thousands of levels deep is just
   * a large event.
   */
  private checkSize(ev: Raw): boolean {
    const { maxEventBytes } = this.rules;
    if (jsonByteLength(ev, maxEventBytes) <= maxEventBytes) return true;
    this.issues.error(
      'event',
      'event_too_large',
      `The event is larger than the limit of ${maxEventBytes} bytes.`,
    );
    return false;
  }
}
