import { Module } from '@nestjs/common';
import { MetricsService } from './metrics.service';

/** The Prometheus registry; one instance however many modules import it. */
@Module({
  providers: [MetricsService],
  exports: [MetricsService],
})
export class MetricsModule {}
