import { Inject, Module, OnModuleInit } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '@app/config/config';
import { MetricsService } from '@app/common/metrics/metrics.service';
import { AuthModule } from '@app/auth/auth.module';
import { MetricsModule } from '@app/common/metrics/metrics.module';
import { UserSuppressionsModule } from '@app/common/suppressions/user-suppressions.module';
import { RateLimitModule, RateLimitStoreModule } from '@app/common/rate-limit/rate-limit.module';
import { IngestController } from './ingest.controller';
import { IngestBodyReader } from './ingest-body.reader';
import { IngestRepository } from './ingest.repository';
import { IngestService } from './ingest.service';
import { IngestWriter } from './ingest-writer';
import { IngestCpuBudgets } from './ingest-cpu.budget';
import { DedupRepository } from './dedup.repository';
import { DedupExpiryService } from './dedup-expiry.service';
import { EventNameRepository } from './event-name.repository';
import { EVENT_NAME_BOUND_PROVIDER } from './event-name-bound.provider';
import { PlansModule } from '@app/plans/plans.module';
import { PlanController } from './plan.controller';
import { QuarantineController } from './quarantine.controller';
import { QuarantineReplayService } from './quarantine-replay.service';

@Module({
  imports: [
    AuthModule,
    RateLimitModule,
    RateLimitStoreModule,
    MetricsModule,
    UserSuppressionsModule,
    PlansModule,
  ],
  controllers: [IngestController, PlanController, QuarantineController],
  exports: [IngestService, IngestBodyReader, IngestCpuBudgets],
  providers: [
    IngestBodyReader,
    IngestService,
    IngestWriter,
    IngestCpuBudgets,
    IngestRepository,
    DedupRepository,
    DedupExpiryService,
    EventNameRepository,
    EVENT_NAME_BOUND_PROVIDER,
    QuarantineReplayService,
  ],
})
export class IngestModule implements OnModuleInit {
  constructor(
    private readonly metrics: MetricsService,
    private readonly reader: IngestBodyReader,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onModuleInit(): void {
    this.metrics.watchIngestInflight(() => this.reader.inFlightBytes, this.config.ingestMaxInflightBytes);
  }
}
