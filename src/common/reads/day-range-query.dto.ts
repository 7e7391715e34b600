import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString, Matches } from 'class-validator';
import { IsRealDate } from './query-validators';
import { AppIdParam, EventNameParam, TestModeParam, TestModeFilter } from './query-params';

/** The app, the day range of §6 and the event and test-mode filters, shared by every rollup-shaped read. */
export class DayRangeQueryDto {
  @AppIdParam()
  appId!: string;

  @ApiPropertyOptional({ format: 'date', description: "First day, inclusive, in the app's time zone." })
  @IsOptional()
  @IsRealDate()
  fromDate?: string;

  @ApiPropertyOptional({
    format: 'date',
    description: "Last day, inclusive, in the app's time zone. Default: today there.",
  })
  @IsOptional()
  @IsRealDate()
  toDate?: string;

  @ApiPropertyOptional({
    pattern: '^[0-9]{1,3}d$',
    example: '7d',
    description: 'The last n days including today, n from 1 to 366. Not combinable with fromDate or toDate.',
  })
  @IsOptional()
  @IsString()
  @Matches(/^[1-9]\d{0,2}d$/, { message: 'range must look like 7d, with 1 to 366 days' })
  range?: string;

  @EventNameParam()
  eventName?: string;

  @TestModeParam()
  testMode?: TestModeFilter;
}
