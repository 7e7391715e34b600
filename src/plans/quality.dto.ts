import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional } from 'class-validator';
import { CursorParam, LimitParam } from '@app/common/reads/page-params';
import { AppIdParam } from '@app/common/reads/query-params';
import { IsRealDate } from '@app/common/reads/query-validators';

export class PlanQualityQueryDto {
  @AppIdParam()
  appId!: string;

  @ApiPropertyOptional({
    format: 'date',
    description: 'First UTC day, inclusive. Default: 6 days before toDate.',
  })
  @IsOptional()
  @IsRealDate()
  fromDate?: string;

  @ApiPropertyOptional({ format: 'date', description: 'Last UTC day, inclusive. Default: today (UTC).' })
  @IsOptional()
  @IsRealDate()
  toDate?: string;

  @LimitParam()
  limit?: number;

  @CursorParam()
  cursor?: string;
}

export class RuleCountDto {
  @ApiProperty({ description: 'The path in the event, e.g. `payload.plan`.' })
  field!: string;
  @ApiProperty({ description: 'The rule: a JSON Schema keyword, `floatValue` or `unplanned`.' })
  rule!: string;
  @ApiProperty({ type: 'integer' })
  count!: number;
}

/** What the tracking plan did with one event name over the range. */
export class EventQualityDto {
  @ApiProperty()
  eventName!: string;
  @ApiProperty({ type: 'integer', description: 'Events the plan accepted, the flagged ones included.' })
  accepted!: number;
  @ApiProperty({ type: 'integer', description: 'Events accepted with violations (mode flag).' })
  flagged!: number;
  @ApiProperty({ type: 'integer', description: 'Events the plan rejected (mode enforce).' })
  rejected!: number;
  @ApiProperty({ type: RuleCountDto, isArray: true, description: 'The five rules broken most often.' })
  topRules!: RuleCountDto[];
}
