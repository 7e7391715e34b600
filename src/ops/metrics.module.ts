import { Global, Module } from '@nestjs/common';
import { MetricsService } from './metrics.service';

/** Global, so that ingest and rollups can inject MetricsService without importing anything. */
@Global()
@Module({
  providers: [MetricsService],
  exports: [MetricsService],
})
export class MetricsModule {}
