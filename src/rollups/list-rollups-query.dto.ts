import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString, Matches, MaxLength } from 'class-validator';
import { IsRealDate } from '@app/common/reads/query-validators';
import { AppIdParam, EventNameParam, TestModeParam, TestModeFilter } from '@app/common/reads/query-params';

export class ListRollupsQueryDto {
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

  @ApiPropertyOptional({ description: 'The X-Next-Cursor of the previous page.', maxLength: 1200 })
  @IsOptional()
  @IsString()
  @MaxLength(1200)
  cursor?: string;
}
