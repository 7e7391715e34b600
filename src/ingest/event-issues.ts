import { MAX_ISSUES_PER_EVENT } from './ingest.limits';
import type { AcceptedEvent, EventErrorCode, EventIssue, EventWarningCode } from './ingest.types';
import { TEXT_CONTROL, TEXT_OK, TEXT_TOO_LONG, scanText } from './text-rules';

/** An issue found by a rule applied after the field rules. */
export interface LaterIssue<C> {
  field: string;
  code: C;
  message: string;
}

/**
 * The issues of one request's events: the response's `errors` and `warnings` (at most
 * `maxListed` of each) and every issue counted by code. Events are checked one at a time
 * (`begin`); a warning reaches the response only if its event is accepted.
 */
export class EventIssues {
  readonly errors: EventIssue<EventErrorCode>[] = [];
  readonly warnings: EventIssue<EventWarningCode>[] = [];
  /** Every error by code, listed or not. */
  readonly errorCounts: Partial<Record<EventErrorCode, number>> = {};
  /** Every warning of an accepted event by code, listed or not. */
  readonly warningCounts: Partial<Record<EventWarningCode, number>> = {};
  /** Rejected events by the code of their first error. */
  readonly rejectedByCode: Partial<Record<EventErrorCode, number>> = {};

  private index = 0;
  private eventId: string | undefined;
  /** The current event's first error, null while it has none. */
  firstError: EventErrorCode | null = null;
  private eventErrors = 0;
  /** The current event's warnings; they reach the response only if the event is accepted. */
  private readonly pending: EventIssue<EventWarningCode>[] = [];

  constructor(private readonly maxListed: number) {}

  /** Starts event `index`; `eventId` names it in its issues once known. */
  begin(index: number): void {
    this.index = index;
    this.firstError = null;
    this.eventErrors = 0;
    if (this.pending.length !== 0) this.pending.length = 0;
    this.eventId = undefined;
  }

  nameEvent(eventId: string): void {
    this.eventId = eventId;
  }

  /** Whether the current event collected warnings. */
  get hasPending(): boolean {
    return this.pending.length !== 0;
  }

  error(field: string, code: EventErrorCode, message: string): void {
    if (this.firstError === null) this.firstError = code;
    if (++this.eventErrors > MAX_ISSUES_PER_EVENT) return;
    this.errorCounts[code] = (this.errorCounts[code] ?? 0) + 1;
    if (this.errors.length >= this.maxListed) return;
    const issue: EventIssue<EventErrorCode> = { index: this.index, field, code, message };
    if (this.eventId !== undefined) issue.eventId = this.eventId;
    this.errors.push(issue);
  }

  warn(field: string, code: EventWarningCode, message: string): void {
    if (this.pending.length >= MAX_ISSUES_PER_EVENT) return;
    const issue: EventIssue<EventWarningCode> = { index: this.index, field, code, message };
    if (this.eventId !== undefined) issue.eventId = this.eventId;
    this.pending.push(issue);
  }

  /** Checks a string field's length and storability; reports and returns false when it breaks a rule. */
  checkText(field: string, s: string, max: number, rejectControl: boolean): boolean {
    const status = scanText(s, max, rejectControl);
    if (status === TEXT_OK) return true;
    if (status === TEXT_TOO_LONG) this.error(field, 'too_long', `${field} is longer than ${max} characters.`);
    else if (status === TEXT_CONTROL)
      this.error(field, 'invalid_value', `${field} must not contain control characters.`);
    else this.error(field, 'unstorable_value', `${field} contains a NUL character or an unpaired surrogate.`);
    return false;
  }

  /** The current event is rejected: its warnings are dropped, only its errors matter to the client. */
  reject(): null {
    const code = this.firstError!;
    this.rejectedByCode[code] = (this.rejectedByCode[code] ?? 0) + 1;
    return null;
  }

  /** The current event is accepted: its warnings reach the response. */
  accept(event: AcceptedEvent): AcceptedEvent {
    for (const issue of this.pending) {
      this.warningCounts[issue.code] = (this.warningCounts[issue.code] ?? 0) + 1;
      if (this.warnings.length < this.maxListed) this.warnings.push(issue);
    }
    return event;
  }

  /**
   * Rejects the event just accepted, for a rule applied after the field rules (the tracking
   * plan): its warnings leave the response and `issues` become its errors.
   */
  rejectLater(issues: LaterIssue<EventErrorCode>[]): void {
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

  /** Adds warnings to the event just accepted (the tracking plan's, under `flag`). */
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
}
