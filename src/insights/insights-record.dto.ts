import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

/** One bucket of GET /api/v1/active-users. */
export class ActiveUsersRowDto {
  @ApiProperty({ format: 'date', description: "First day of the bucket, inclusive, in the app's time zone." })
  start!: string;
  @ApiProperty({ format: 'date', description: 'Last day of the bucket, inclusive.' })
  end!: string;
  @ApiProperty({
    type: 'integer',
    description: 'Distinct non-null anonymousUserId among the stored events of the local days [start, end].',
  })
  users!: number;
  @ApiProperty({ description: 'Every day of the bucket has ended and was computed after its end.' })
  final!: boolean;
}

export class BreakdownFloatValueDto {
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

/** One row of GET /api/v1/breakdown. */
export class BreakdownRowDto {
  @ApiPropertyOptional({ format: 'date', description: 'The local day, with interval=day only.' })
  date?: string;
  @ApiProperty({
    type: String,
    nullable: true,
    description: 'The value; null on the row of events without the field, and on the `other` row.',
  })
  value!: string | null;
  @ApiProperty({ type: 'integer' })
  events!: number;
  @ApiProperty({ type: 'integer', description: "Distinct anonymousUserId among the row's events." })
  users!: number;
  @ApiProperty({ type: 'integer', description: "Distinct sessionId among the row's events." })
  sessions!: number;
  @ApiProperty({ type: BreakdownFloatValueDto, nullable: true })
  floatValue!: BreakdownFloatValueDto | null;
  @ApiProperty({ description: 'True on the one row that sums every value past `limit`.' })
  other!: boolean;
}
