import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import type { EventErrorCode, EventWarningCode, IngestResult } from './ingest.types';

const ERROR_CODES: Record<EventErrorCode, true> = {
  missing_field: true,
  invalid_type: true,
  invalid_value: true,
  too_long: true,
  too_many_keys: true,
  nested_value: true,
  event_too_large: true,
  event_too_old: true,
  pii_detected: true,
  unstorable_value: true,
  too_many_event_names: true,
  user_suppressed: true,
  schema_violation: true,
  unplanned_event: true,
};

const WARNING_CODES: Record<EventWarningCode, true> = {
  ignored_field: true,
  invalid_format: true,
  null_value_dropped: true,
  unlinked: true,
  pii_redacted: true,
  pii_pseudonymised: true,
  clock_skew_corrected: true,
  future_time_clamped: true,
  schema_violation: true,
  unplanned_event: true,
  quarantine_full: true,
};

class EventIssueDto {
  @ApiProperty({ description: 'Position of the event in the batch, from 0.' })
  index: number;

  @ApiPropertyOptional({ description: 'The eventId of the event, when it had a usable one.' })
  eventId?: string;

  @ApiProperty({
    description: 'The field concerned, e.g. `eventName` or `payload.plan`.',
    examples: ['payload.plan'],
  })
  field: string;

  @ApiProperty()
  message: string;
}

export class EventErrorDto extends EventIssueDto {
  @ApiProperty({
    enum: Object.keys(ERROR_CODES),
    description: 'Why the event was rejected. Do not retry it.',
  })
  code: EventErrorCode;
}

export class EventWarningDto extends EventIssueDto {
  @ApiProperty({
    enum: Object.keys(WARNING_CODES),
    description: 'What was changed or ignored; the event was kept.',
  })
  code: EventWarningCode;
}

/** The batch metering result (documentation of `IngestResult`). */
export class IngestResultDto implements IngestResult {
  @ApiProperty({ description: 'Events in the batch: accepted + duplicates + rejected.' })
  received: number;

  @ApiProperty({ description: 'Events stored by this request.' })
  accepted: number;

  @ApiProperty({
    description: 'Events whose eventId was already seen (in this batch or within 7 days); not stored again.',
  })
  duplicates: number;

  @ApiProperty({ description: 'Events refused; see `errors`.' })
  rejected: number;

  @ApiProperty({
    description:
      'The billed units: every accepted event when the key is a live key (tly_live_…), including events ' +
      'that say `isTestMode: true`; always 0 with a test key (tly_test_…).',
  })
  metered: number;

  @ApiProperty({ description: 'True when the batch was sent with a test key.' })
  testMode: boolean;

  @ApiProperty({ description: 'Size of the decoded body in bytes.' })
  payloadBytes: number;

  @ApiProperty({ description: 'Receive time, epoch milliseconds.' })
  serverTime: number;

  @ApiProperty({
    type: [EventErrorDto],
    description:
      'Per-event errors, at most INGEST_MAX_ERRORS_LISTED (default 100) entries in batch order; `errorCounts` counts them all.',
  })
  errors: EventErrorDto[];

  @ApiProperty({
    type: [EventWarningDto],
    description:
      'Per-event warnings of accepted events (and `quarantine_full` of events a tracking plan rejected), at most INGEST_MAX_ERRORS_LISTED (default 100) entries; `warningCounts` counts them all.',
  })
  warnings: EventWarningDto[];

  @ApiProperty({
    type: 'object',
    properties: Object.fromEntries(Object.keys(ERROR_CODES).map((code) => [code, { type: 'integer' }])),
    additionalProperties: false,
    description:
      'Errors of the whole batch by code, including those past the listed ones. A code that did not occur is absent.',
    example: { invalid_type: 2 },
  })
  errorCounts: Partial<Record<EventErrorCode, number>>;

  @ApiProperty({
    type: 'object',
    properties: Object.fromEntries(Object.keys(WARNING_CODES).map((code) => [code, { type: 'integer' }])),
    additionalProperties: false,
    description:
      'Warnings of the accepted events by code, including those past the listed ones. A code that did not occur is absent.',
    example: { ignored_field: 1 },
  })
  warningCounts: Partial<Record<EventWarningCode, number>>;
}
