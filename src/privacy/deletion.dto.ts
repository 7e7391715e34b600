import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { NO_CONTROL_CHARACTERS_PATTERN } from '@app/common/control-characters';
import { IsOptional } from 'class-validator';
import { CursorParam, LimitParam } from '@app/common/reads/page-params';
import { IsInstant } from '@app/common/reads/query-validators';
import { AppIdParam } from '@app/common/reads/query-params';
import type { DeletionView } from './deletions.service';

/** The body of POST /api/v1/deletions (checked by parseDeletionRequest). */
export class CreateDeletionDto {
  @ApiProperty({ format: 'uuid', description: 'The app whose users are erased.' })
  appId!: string;

  @ApiPropertyOptional({
    type: 'array',
    items: { type: 'string', minLength: 1, maxLength: 200, pattern: NO_CONTROL_CHARACTERS_PATTERN },
    minItems: 1,
    maxItems: 1000,
    description:
      'The users to erase, as sent in events (`anonymousUserId`); 1 to 1,000, without control characters. ' +
      'This or `userIds` is required.',
  })
  anonymousUserIds?: string[];

  @ApiPropertyOptional({
    type: 'array',
    items: { type: 'string', minLength: 1, maxLength: 200, pattern: NO_CONTROL_CHARACTERS_PATTERN },
    minItems: 1,
    maxItems: 1000,
    description:
      'Account ids as sent through the Segment (`userId`) or PostHog (`distinct_id`) formats, raw: they are ' +
      'pseudonymised as ingest does before matching and are never stored or logged. With `anonymousUserIds`, ' +
      'at most 1,000 ids in all.',
  })
  userIds?: string[];

  @ApiPropertyOptional({
    default: true,
    description: 'Also refuse the users’ future events (`user_suppressed`) from the 202 on.',
  })
  suppress?: boolean;
}

export class ListDeletionsQueryDto {
  @AppIdParam()
  appId!: string;

  @LimitParam()
  limit?: number;

  @CursorParam()
  cursor?: string;

  @ApiPropertyOptional({
    description:
      'Only the deletions done at or after this time (their `finishedAt`): epoch ms or ISO-8601 with an offset.',
    example: '1763769600000',
  })
  @IsOptional()
  @IsInstant()
  since?: string;
}

const STATUSES = ['pending', 'running', 'done', 'failed'];

export class DeletionRecordDto implements DeletionView {
  @ApiProperty({ format: 'uuid' })
  id!: string;

  @ApiProperty({ format: 'uuid' })
  appId!: string;

  @ApiProperty({ enum: STATUSES })
  status!: DeletionView['status'];

  @ApiProperty({ description: 'How many distinct users the request named (never the ids).' })
  users!: number;

  @ApiProperty()
  suppress!: boolean;

  @ApiProperty({ description: 'Events deleted so far.' })
  eventsDeleted!: number;

  @ApiProperty({ description: 'Days whose rollups were recomputed.' })
  daysRecomputed!: number;

  @ApiProperty({ description: 'Epoch milliseconds.' })
  createdAt!: number;

  @ApiProperty({ type: 'integer', nullable: true, description: 'Epoch milliseconds, or null.' })
  startedAt!: number | null;

  @ApiProperty({ type: 'integer', nullable: true, description: 'Epoch milliseconds, or null.' })
  finishedAt!: number | null;

  @ApiPropertyOptional({
    type: 'string',
    isArray: true,
    description:
      'Once `done`: the users’ keys outside Tally, the `userKey` of their exported records (an HMAC of the ' +
      'app and the user id, never the id). Absent before.',
  })
  userKeys?: string[];
}
