import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { applyDecorators } from '@nestjs/common';
import { Transform } from 'class-transformer';
import { IsIn, IsInt, IsNotEmpty, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { HasNoControlCharacters } from '@app/common/reads/query-validators';
import { DayRangeQueryDto } from '@app/common/reads/day-range-query.dto';
import { NO_CONTROL_CHARACTERS_PATTERN } from '@app/common/control-characters';

export const ACTIVE_USER_INTERVALS = ['day', 'week', 'month', 'total'] as const;
export type ActiveUserInterval = (typeof ACTIVE_USER_INTERVALS)[number];
export const BREAKDOWN_INTERVALS = ['total', 'day'] as const;
export type BreakdownInterval = (typeof BREAKDOWN_INTERVALS)[number];

export class ActiveUsersQueryDto extends DayRangeQueryDto {
  @ApiPropertyOptional({
    enum: ACTIVE_USER_INTERVALS,
    default: 'day',
    description: 'Bucket size: local days, ISO weeks (Monday first), calendar months, or the whole range.',
  })
  @IsOptional()
  @IsIn(ACTIVE_USER_INTERVALS, { message: 'interval must be day, week, month or total' })
  interval?: ActiveUserInterval;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 1,
    maximum: 90,
    default: 1,
    description:
      'Only with interval=day: each day counts the users of the `window` days ending that day (7: the rolling ' +
      'weekly curve, 28: the monthly one).',
  })
  @IsOptional()
  @Transform(toInteger)
  @IsInt({ message: 'window must be an integer' })
  @Min(1, { message: 'window must be 1 to 90' })
  @Max(90, { message: 'window must be 1 to 90' })
  window?: number;
}

/** Only plain decimal digits become a number; anything else stays a string and fails `IsInt`. */
function toInteger({ value }: { value: unknown }): unknown {
  return typeof value === 'string' && /^-?\d{1,7}$/.test(value) ? Number(value) : value;
}

/** An equality filter on a built-in dimension. */
const DimensionFilter = (name: string) =>
  applyDecorators(
    ApiPropertyOptional({
      maxLength: 100,
      pattern: NO_CONTROL_CHARACTERS_PATTERN,
      description: `Only events whose ${name} equals this value.`,
    }),
    IsOptional(),
    IsString(),
    MaxLength(100),
    HasNoControlCharacters(),
  );

export class BreakdownQueryDto extends DayRangeQueryDto {
  @ApiProperty({
    example: 'appVersion',
    description:
      'The dimension: eventName, platform, appVersion, osVersion, deviceModel, locale, or payload.<key> for a ' +
      'key the app declared (`tally apps set-dimensions`). Anything else is 400 `unknown_dimension`.',
  })
  @IsNotEmpty({ message: 'by is required' })
  @IsString()
  @MaxLength(200)
  by!: string;

  @ApiPropertyOptional({ enum: BREAKDOWN_INTERVALS, default: 'total' })
  @IsOptional()
  @IsIn(BREAKDOWN_INTERVALS, { message: 'interval must be total or day' })
  interval?: BreakdownInterval;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 1,
    maximum: 1000,
    default: 50,
    description: 'The values with the most events (per day with interval=day); the rest is one `other` row.',
  })
  @IsOptional()
  @Transform(toInteger)
  @IsInt({ message: 'limit must be an integer' })
  @Min(1, { message: 'limit must be 1 to 1000' })
  @Max(1000, { message: 'limit must be 1 to 1000' })
  limit?: number;

  @DimensionFilter('platform')
  platform?: string;

  @DimensionFilter('appVersion')
  appVersion?: string;

  @DimensionFilter('osVersion')
  osVersion?: string;

  @DimensionFilter('deviceModel')
  deviceModel?: string;

  @DimensionFilter('locale')
  locale?: string;
}
