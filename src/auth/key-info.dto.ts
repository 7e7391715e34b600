import { ApiProperty } from '@nestjs/swagger';

export class KeyAppDto {
  @ApiProperty({ format: 'uuid' })
  id!: string;
  @ApiProperty()
  name!: string;
  @ApiProperty({ example: 'Europe/Berlin', description: "IANA time zone of the app's rollup days." })
  timezone!: string;
  @ApiProperty({
    type: [String],
    example: ['plan'],
    description: 'Payload keys the app declared as breakdown dimensions (`by=payload.<key>`).',
  })
  dimensions!: string[];
}

/** What GET /api/v1/key tells a caller about the API key it presented. Never the secret. */
export class KeyInfoDto {
  @ApiProperty({ format: 'uuid' })
  id!: string;
  @ApiProperty({
    description:
      'The key as listings show it: its kind prefix and last four characters, e.g. `tly_api_…a1B2`.',
    examples: ['tly_api_…a1B2'],
  })
  prefix!: string;
  @ApiProperty({ type: [String], description: 'Granted scopes, e.g. `events:read`, `rollups:read`.' })
  scopes!: string[];
  @ApiProperty({
    type: String,
    format: 'date-time',
    nullable: true,
    description: 'When the key stops working; null when it does not expire.',
  })
  expiresAt!: string | null;
  @ApiProperty({ type: [KeyAppDto], description: 'The apps the key may read, by name.' })
  apps!: KeyAppDto[];
}
