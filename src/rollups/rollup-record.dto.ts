import { ApiProperty } from '@nestjs/swagger';

export class FloatValueStatsDto {
  @ApiProperty({ type: 'integer' })
  count!: number;
  @ApiProperty()
  sum!: number;
  @ApiProperty()
  min!: number;
  @ApiProperty()
  max!: number;
  @ApiProperty()
  avg!: number;
}

/** One daily rollup row as GET /api/v1/rollups returns it. */
export class RollupRecordDto {
  @ApiProperty({ format: 'uuid' })
  appId!: string;
  @ApiProperty({ format: 'date', description: 'Calendar day in the time zone `timezone`.' })
  date!: string;
  @ApiProperty({ type: String, nullable: true, description: 'null on the app-wide total row of the day.' })
  eventName!: string | null;
  @ApiProperty()
  isTestMode!: boolean;
  @ApiProperty({ type: 'integer' })
  events!: number;
  @ApiProperty({ type: 'integer', description: 'Distinct anonymousUserId values (daily active users).' })
  uniqueUsers!: number;
  @ApiProperty({ type: 'integer' })
  uniqueSessions!: number;
  @ApiProperty({ type: FloatValueStatsDto, nullable: true })
  floatValue!: FloatValueStatsDto | null;
  @ApiProperty({
    description: 'The day has ended (in `timezone`) and was computed after its end: the numbers are settled.',
  })
  final!: boolean;
  @ApiProperty({ type: 'integer', description: 'When the row was computed, epoch ms.' })
  computedAt!: number;
  @ApiProperty({
    example: 'Europe/Berlin',
    description: "The IANA time zone the row's day was computed in: the app's zone.",
  })
  timezone!: string;
}
