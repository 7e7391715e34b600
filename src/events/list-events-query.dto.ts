import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString, MaxLength } from 'class-validator';
import { NO_CONTROL_CHARACTERS_PATTERN } from '@app/common/control-characters';
import { IsInstant, HasNoControlCharacters } from '@app/common/reads/query-validators';
import { AppIdParam, EventNameParam, TestModeParam, TestModeFilter } from '@app/common/reads/query-params';
import { CursorParam, LimitParam } from '@app/common/reads/page-params';

export { DEFAULT_LIMIT, MAX_LIMIT } from '@app/common/reads/page-params';

export class ListEventsQueryDto {
  @AppIdParam()
  appId!: string;

  @LimitParam()
  limit?: number;

  @CursorParam()
  cursor?: string;

  @EventNameParam()
  eventName?: string;

  @ApiPropertyOptional({ maxLength: 200, pattern: NO_CONTROL_CHARACTERS_PATTERN })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  @HasNoControlCharacters()
  anonymousUserId?: string;

  @ApiPropertyOptional({ maxLength: 200, pattern: NO_CONTROL_CHARACTERS_PATTERN })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  @HasNoControlCharacters()
  sessionId?: string;

  @ApiPropertyOptional({
    description: 'Earliest event time, inclusive: epoch ms or ISO-8601 (a date-time needs an offset).',
    example: '2026-11-21T00:00:00Z',
  })
  @IsOptional()
  @IsInstant()
  from?: string;

  @ApiPropertyOptional({
    description: 'Latest event time, exclusive: epoch ms or ISO-8601 (a date-time needs an offset).',
    example: '1763769600000',
  })
  @IsOptional()
  @IsInstant()
  to?: string;

  @TestModeParam()
  testMode?: TestModeFilter;
}
