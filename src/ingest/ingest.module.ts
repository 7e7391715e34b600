import { Inject, Module, OnModuleInit } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '@app/config/config';
import { MetricsService } from '@app/ops/metrics.service';
import { AuthModule } from '@app/auth/auth.module';
import { IngestController } from './ingest.controller';
import { IngestBodyReader } from './ingest-body.reader';
import { IngestRepository } from './ingest.repository';
import { IngestService } from './ingest.service';
import { IngestWriter } from './ingest-writer';

@Module({
  imports: [AuthModule],
  controllers: [IngestController],
  providers: [IngestBodyReader, IngestService, IngestWriter, IngestRepository],
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
