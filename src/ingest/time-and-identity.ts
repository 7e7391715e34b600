import type { EventIssues } from './event-issues';
import { FUTURE_TOLERANCE_MS } from './ingest.limits';
import type { AcceptedEvent } from './ingest.types';
import { identifierKind } from './pii';
import type { EventRules } from './event-rules';

/**
 * The rules that apply to an event whose fields passed: its effective time (the client clock
 * correction, the future clamp, the age limit), its privacy mode, the PII guard's pseudonym of
 * the user id, and the app's suppressed users.
 */
export class TimeAndIdentity {
  constructor(
    private readonly issues: EventIssues,
    private readonly rules: EventRules,
  ) {}

  /** Completes `event` (its `ts`, user and session ids); the event to store, or null. */
  apply(event: AcceptedEvent, privacyMode: unknown): AcceptedEvent | null {
    const ts = this.effectiveTime(event.eventTime);
    if (ts === null) return this.issues.reject();
    event.ts = ts;
    // The common event needs none of these steps; the checks keep it from paying for the calls.
    if (privacyMode !== undefined && privacyMode !== null) this.applyPrivacyMode(privacyMode, event);
    if (event.anonymousUserId) {
      this.pseudonymiseUser(event);
      // After the pseudonym: the list holds the id as it would be stored.
      if (this.rules.suppressed && this.rules.suppressed(event.anonymousUserId!)) return this.suppress();
    }
    return this.issues.hasPending ? this.issues.accept(event) : event;
  }

  /** The effective time; null when the event is too old. */
  private effectiveTime(eventTime: number | null): number | null {
    const { receivedAt, skewMs } = this.rules;
    if (eventTime === null) return receivedAt;
    let ts = eventTime;
    if (skewMs !== 0) {
      ts += skewMs;
      this.issues.warn(
        'eventTime',
        'clock_skew_corrected',
        `eventTime corrected by ${skewMs} ms for the client clock.`,
      );
    }
    if (ts > receivedAt + FUTURE_TOLERANCE_MS) {
      ts = receivedAt;
      this.issues.warn(
        'eventTime',
        'future_time_clamped',
        'eventTime is in the future; the receive time is used.',
      );
    } else if (ts < this.rules.oldestTs) {
      const days = Math.round((this.rules.receivedAt - this.rules.oldestTs) / 86_400_000);
      this.issues.error(
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
      this.issues.warn(
        'privacyMode',
        'unlinked',
        'Unlinked event: anonymousUserId and sessionId are not stored.',
      );
      event.anonymousUserId = null;
      event.sessionId = null;
    } else {
      this.issues.warn('privacyMode', 'ignored_field', 'privacyMode supports only "unlinked"; ignored.');
    }
  }

  /** An email address or phone number as the user id is replaced by a keyed hash. */
  private pseudonymiseUser(event: AcceptedEvent): void {
    const id = event.anonymousUserId;
    if (!id) return;
    const kind = identifierKind(id);
    if (!kind) return;
    event.anonymousUserId = this.rules.pseudonymise(kind, id);
    this.issues.warn(
      'anonymousUserId',
      'pii_pseudonymised',
      `anonymousUserId looked like ${kind === 'email' ? 'an email address' : 'a phone number'}; stored as a keyed hash.`,
    );
  }

  private suppress(): null {
    this.issues.error(
      'anonymousUserId',
      'user_suppressed',
      "This user's data was erased; their events are not stored.",
    );
    return this.issues.reject();
  }
}
