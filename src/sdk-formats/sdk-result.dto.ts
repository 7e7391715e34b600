import { ApiProperty } from '@nestjs/swagger';
import { IngestResultDto } from '@app/ingest/ingest-result.dto';

class SdkResultDto extends IngestResultDto {
  @ApiProperty({
    description:
      'Messages counted and not stored (identify, group, alias; PostHog `$identify`, `$create_alias`, ' +
      '`$groupidentify`, `$set`). Not part of `received`. Per-event `index` is the position in the SDK batch.',
  })
  acknowledged!: number;
}

export class SegmentResultDto extends SdkResultDto {
  @ApiProperty({ enum: [true], description: 'What Segment’s SDKs expect: the batch was taken.' })
  success!: true;
}

export class PostHogResultDto extends SdkResultDto {
  @ApiProperty({ enum: [1], description: 'What PostHog’s SDKs expect: the batch was taken.' })
  status!: 1;
}
