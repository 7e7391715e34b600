import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsNotEmpty, IsOptional, IsString, IsUUID, Matches, MaxLength } from 'class-validator';
import { IsRealDate, HasNoControlCharacters } from '@app/events/query-validators';
import { TEST_MODES, TestModeFilter } from '@app/events/list-events-query.dto';

export class ListRollupsQueryDto {
  @ApiProperty({ format: 'uuid', description: 'The app to read.' })
  @IsNotEmpty({ message: 'appId is required' })
  @IsString()
  @IsUUID('all', { message: 'appId must be a UUID' })
  appId!: string;

  @ApiPropertyOptional({ format: 'date', description: 'First UTC day, inclusive.' })
  @IsOptional()
  @IsRealDate()
  fromDate?: string;

  @ApiPropertyOptional({ format: 'date', description: 'Last UTC day, inclusive. Default: today (UTC).' })
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

  @ApiPropertyOptional({ maxLength: 200 })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  @HasNoControlCharacters()
  eventName?: string;

  @ApiPropertyOptional({ enum: TEST_MODES, default: 'false' })
  @IsOptional()
  @IsIn(TEST_MODES, { message: 'testMode must be false, true or all' })
  testMode?: TestModeFilter;
}
