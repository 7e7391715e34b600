import { Module } from '@nestjs/common';
import { MetricsModule } from '@app/common/metrics/metrics.module';
import { ReadsModule } from '@app/common/reads/reads.module';
import { RollupsCoreModule } from '@app/rollups/rollups-core.module';
import { DimensionRepository } from './dimension.repository';
import { DimensionsService } from './dimensions.service';
import { InsightComputationRepository } from './insight-computation.repository';
import { InsightDayRepository } from './insight-day.repository';
import { InsightDaySourceRepository } from './insight-day-source.repository';
import { InsightRepository } from './insight.repository';
import { InsightsService } from './insights.service';
import { InsightsMetrics } from './insights.metrics';
import { InsightsStep } from './insights.step';

/**
 * Active users and breakdowns without HTTP: the step the rollup computation runs for every day it
 * recomputes, the reads, and the declared dimensions. Shared with the admin CLI.
 */
@Module({
  imports: [ReadsModule, MetricsModule, RollupsCoreModule],
  providers: [
    InsightRepository,
    InsightComputationRepository,
    InsightDayRepository,
    InsightDaySourceRepository,
    InsightsService,
    InsightsStep,
    InsightsMetrics,
    DimensionRepository,
    DimensionsService,
  ],
  exports: [InsightsService, DimensionsService],
})
export class InsightsCoreModule {}
