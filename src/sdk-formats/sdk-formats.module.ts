import { Module } from '@nestjs/common';
import { AuthModule } from '@app/auth/auth.module';
import { MetricsModule } from '@app/common/metrics/metrics.module';
import { RateLimitModule } from '@app/common/rate-limit/rate-limit.module';
import { IngestModule } from '@app/ingest/ingest.module';
import { PostHogController } from './posthog.controller';
import { SdkIngestService } from './sdk-ingest.service';
import { PostHogKeyGuard, SegmentKeyGuard } from './sdk-key.guard';
import { SegmentController } from './segment.controller';

/** Ingest in the wire formats of Segment's and PostHog's SDKs, onto ingest's own path. */
@Module({
  imports: [AuthModule, RateLimitModule, MetricsModule, IngestModule],
  controllers: [SegmentController, PostHogController],
  providers: [SdkIngestService, SegmentKeyGuard, PostHogKeyGuard],
})
export class SdkFormatsModule {}
