import { ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsInt, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { NO_CONTROL_CHARACTERS_PATTERN } from '@app/common/control-characters';
import { IsInstant, HasNoControlCharacters } from '@app/common/reads/query-validators';
import { AppIdParam, EventNameParam, TestModeParam, TestModeFilter } from '@app/common/reads/query-params';

export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 1000;

/** Only plain decimal digits become a number; anything else stays a string and fails `IsInt`. */
const toInteger = ({ value }: { value: unknown }) =>
  typeof value === 'string' && /^-?\d{1,7}$/.test(value) ? Number(value) : value;

export class ListEventsQueryDto {
  @AppIdParam()
  appId!: string;

  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT })
  @IsOptional()
  @Transform(toInteger)
  @IsInt({ message: 'limit must be an integer' })
  @Min(1, { message: `limit must be between 1 and ${MAX_LIMIT}` })
  @Max(MAX_LIMIT, { message: `limit must be between 1 and ${MAX_LIMIT}` })
  limit?: number;

  @ApiPropertyOptional({ description: 'The X-Next-Cursor of the previous page.' })
  @IsOptional()
  @IsString()
  @MaxLength(200)
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
