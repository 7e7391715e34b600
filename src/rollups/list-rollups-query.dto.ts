import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString, MaxLength } from 'class-validator';
import { DayRangeQueryDto } from '@app/common/reads/day-range-query.dto';

export class ListRollupsQueryDto extends DayRangeQueryDto {
  @ApiPropertyOptional({ description: 'The X-Next-Cursor of the previous page.', maxLength: 1200 })
  @IsOptional()
  @IsString()
  @MaxLength(1200)
  cursor?: string;
}
