import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsNotEmpty, IsOptional, IsString, Matches, MaxLength } from 'class-validator';
import { IsInstant } from '@app/common/reads/query-validators';
import { AppIdParam, TestModeParam, TestModeFilter } from '@app/common/reads/query-params';

import { EXPORT_FORMATS, type ExportFormat } from './export-format';

export { EXPORT_FORMATS, type ExportFormat };

/** `<receivedAt>:<id>`: the receive time in epoch ms, a colon, then the record's `id`. */
export const AFTER_PATTERN = '^\\d{1,15}:[^\\s:]{1,200}$';

export class ExportQueryDto {
  @AppIdParam()
  appId!: string;

  @ApiProperty({
    description:
      'Start of the window on the receive time (`receivedAt`), inclusive: epoch ms or ISO-8601 (a date-time needs an offset).',
    example: '2026-11-21T10:00:00Z',
  })
  @IsNotEmpty({ message: 'from is required' })
  @IsInstant()
  from!: string;

  @ApiPropertyOptional({
    description:
      'End of the window on the receive time, exclusive. Defaults to, and may not be later than, the export horizon (now − EXPORT_SETTLE_MS).',
    example: '2026-11-21T11:00:00Z',
  })
  @IsOptional()
  @IsInstant()
  to?: string;

  @ApiPropertyOptional({
    description:
      'Resume point: `<receivedAt>:<id>` of the last complete record received; the export continues just after it.',
    pattern: AFTER_PATTERN,
    example: '1763719200123:48213',
  })
  @IsOptional()
  @IsString()
  @MaxLength(220)
  @Matches(new RegExp(AFTER_PATTERN), { message: 'after must be <receivedAt epoch ms>:<id>' })
  after?: string;

  @ApiPropertyOptional({ enum: EXPORT_FORMATS, default: 'ndjson' })
  @IsOptional()
  @IsIn(EXPORT_FORMATS, { message: 'format must be ndjson or parquet' })
  format?: ExportFormat;

  @TestModeParam()
  testMode?: TestModeFilter;
}
