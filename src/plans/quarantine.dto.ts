import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsOptional } from 'class-validator';
import { EventRecordDto } from '@app/common/reads/event-record.dto';
import { CursorParam, LimitParam } from '@app/common/reads/page-params';
import { AppIdParam, EventNameParam } from '@app/common/reads/query-params';
import type { Violation, ViolationCode } from './plan.types';

const VIOLATION_CODES: ViolationCode[] = ['schema_violation', 'unplanned_event'];

export class ViolationDto {
  @ApiProperty({ description: 'The path in the event, e.g. `payload.plan` or `floatValue`.' })
  field!: string;
  @ApiProperty({ enum: VIOLATION_CODES })
  code!: ViolationCode;
  @ApiProperty({ description: 'The rule broken.' })
  message!: string;
}

/** One quarantined event: the event record as it would have been stored, and why it was not. */
export class QuarantineRecord extends EventRecordDto {
  @ApiProperty({ enum: VIOLATION_CODES })
  code!: ViolationCode;
  @ApiProperty({ type: ViolationDto, isArray: true })
  violations!: Violation[];
}

export class ListQuarantineQueryDto {
  @AppIdParam()
  appId!: string;

  @LimitParam()
  limit?: number;

  @CursorParam()
  cursor?: string;

  @EventNameParam()
  eventName?: string;

  @ApiPropertyOptional({ enum: VIOLATION_CODES })
  @IsOptional()
  @IsIn(VIOLATION_CODES, { message: `code must be one of ${VIOLATION_CODES.join(', ')}` })
  code?: ViolationCode;
}

export class ReplayResultDto {
  @ApiProperty({
    type: 'integer',
    description: 'Events that now pass the plan, stored and removed from the quarantine.',
  })
  replayed!: number;
  @ApiProperty({
    type: 'integer',
    description: 'Events already stored (same eventId in the dedup window); removed from the quarantine.',
  })
  duplicates!: number;
  @ApiProperty({
    type: 'integer',
    description:
      'Events that still break the plan, or whose name the day has no room for ' +
      '(INGEST_MAX_EVENT_NAMES_PER_DAY); they stay in the quarantine.',
  })
  stillRejected!: number;
}

export { VIOLATION_CODES };
