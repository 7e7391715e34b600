import { Module } from '@nestjs/common';
import { AuthCoreModule } from '@app/auth/auth-core.module';
import { MetricsModule } from '@app/common/metrics/metrics.module';
import { RateLimitStoreModule } from '@app/common/rate-limit/rate-limit.module';
import { UserSuppressionsModule } from '@app/common/suppressions/user-suppressions.module';
import { IngestRepository } from './ingest.repository';
import { IngestService } from './ingest.service';
import { BatchEvaluator } from './batch-evaluator';
import { IngestCheckService } from './ingest-check.service';
import { IngestWriter } from './ingest-writer';
import { DedupRepository } from './dedup.repository';
import { DedupService } from './dedup.service';
import { EventNameRepository } from './event-name.repository';
import { EVENT_NAME_BOUND_PROVIDER } from './event-name-bound.provider';
import { ReplayWriter } from './replay-writer';

/**
 * Ingest's rules and its insert, without HTTP or the hourly dedup expiry: what the service and
 * the admin CLI (the plan's dry run, the quarantine's replay) share.
 */
@Module({
  imports: [AuthCoreModule, RateLimitStoreModule, MetricsModule, UserSuppressionsModule],
  providers: [
    IngestService,
    BatchEvaluator,
    IngestCheckService,
    IngestWriter,
    IngestRepository,
    DedupRepository,
    DedupService,
    EventNameRepository,
    EVENT_NAME_BOUND_PROVIDER,
    ReplayWriter,
  ],
  // DedupService is for IngestModule's hourly expiry, the other half of this feature.
  exports: [IngestService, IngestCheckService, ReplayWriter, DedupService],
})
export class IngestCoreModule {}
