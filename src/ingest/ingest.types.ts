import type { EventPayload, EventValues } from '@app/common/events/event-fields';

/** Per-event codes that reject the event. Stable: SDKs switch on them. */
export type EventErrorCode =
  | 'missing_field'
  | 'invalid_type'
  | 'invalid_value'
  | 'too_long'
  | 'too_many_keys'
  | 'nested_value'
  | 'event_too_large'
  | 'event_too_old'
  | 'pii_detected'
  | 'unstorable_value'
  | 'too_many_event_names'
  | 'user_suppressed'
  | 'schema_violation'
  | 'unplanned_event';

/** Per-event codes that keep the event but say what was changed or ignored. */
export type EventWarningCode =
  | 'ignored_field'
  | 'invalid_format'
  | 'null_value_dropped'
  | 'unlinked'
  | 'pii_redacted'
  | 'pii_pseudonymised'
  | 'clock_skew_corrected'
  | 'future_time_clamped'
  | 'schema_violation'
  | 'unplanned_event'
  | 'quarantine_full';

export interface EventIssue<C extends string = EventErrorCode | EventWarningCode> {
  index: number;
  eventId?: string;
  field: string;
  code: C;
  message: string;
}

export type { PiiPolicy } from '@app/config/config';

export type PayloadValue = string | number | boolean;
export type Payload = EventPayload;

/**
 * An event that passed validation, normalised and ready to store: the event's own fields of
 * EVENT_FIELDS (`ts` is the effective time, skew-corrected and clamped, epoch ms; `eventTime` is
 * as sent), and its position in the request.
 */
export interface AcceptedEvent extends EventValues {
  index: number;
}

/** The 200 body of POST /api/ingest (the batch metering result). */
export interface IngestResult {
  received: number;
  accepted: number;
  duplicates: number;
  rejected: number;
  metered: number;
  testMode: boolean;
  payloadBytes: number;
  serverTime: number;
  /** At most INGEST_MAX_ERRORS_LISTED entries. */
  errors: EventIssue<EventErrorCode>[];
  /** At most INGEST_MAX_ERRORS_LISTED entries. */
  warnings: EventIssue<EventWarningCode>[];
  /** Every error of the batch by code, including those past the listed ones. */
  errorCounts: Partial<Record<EventErrorCode, number>>;
  /** Every warning of the batch's accepted events by code, including those past the listed ones. */
  warningCounts: Partial<Record<EventWarningCode, number>>;
}
