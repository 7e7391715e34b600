import { Inject, Module, OnModuleInit } from '@nestjs/common';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { MetricsService } from '@app/common/metrics/metrics.service';
import { AuthModule } from '@app/auth/auth.module';
import { MetricsModule } from '@app/common/metrics/metrics.module';
import { UserSuppressionsModule } from '@app/common/suppressions/user-suppressions.module';
import { RateLimitModule, RateLimitStoreModule } from '@app/common/rate-limit/rate-limit.module';
import { IngestController } from './ingest.controller';
import { IngestBodyReader } from './ingest-body.reader';
import { IngestCpuBudgets } from './ingest-cpu.budget';
import { IngestCoreModule } from './ingest-core.module';
import { DedupExpiryService } from './dedup-expiry.service';

@Module({
  imports: [
    IngestCoreModule,
    AuthModule,
    RateLimitModule,
    RateLimitStoreModule,
    MetricsModule,
    UserSuppressionsModule,
  ],
  controllers: [IngestController],
  providers: [IngestBodyReader, IngestCpuBudgets, DedupExpiryService],
  // The SDK formats and the plan endpoints read bodies as native ingest does; the SDK formats
  // charge CPU on the same budgets.
  exports: [IngestCoreModule, IngestBodyReader, IngestCpuBudgets],
})
export class IngestModule implements OnModuleInit {
  constructor(
    private readonly metrics: MetricsService,
    private readonly reader: IngestBodyReader,
    @Inject(APP_CONFIG) private readonly config: ConfigSlice<'ingestMaxInflightBytes'>,
  ) {}

  onModuleInit(): void {
    this.metrics.watchIngestInflight(() => this.reader.inFlightBytes, this.config.ingestMaxInflightBytes);
  }
}
