import { Module } from '@nestjs/common';
import { AuthModule } from '@app/auth/auth.module';
import { RateLimitModule } from '@app/common/rate-limit/rate-limit.module';
import { ReadsModule } from '@app/common/reads/reads.module';
import { RollupsModule } from '@app/rollups/rollups.module';
import { InsightComputationRepository } from './insight-computation.repository';
import { InsightRepository } from './insight.repository';
import { InsightsController } from './insights.controller';
import { InsightsService } from './insights.service';
import { InsightsStep } from './insights.step';
import { DimensionRepository } from './dimension.repository';
import { DimensionsService } from './dimensions.service';

@Module({
  imports: [ReadsModule, AuthModule, RateLimitModule, RollupsModule],
  controllers: [InsightsController],
  providers: [
    InsightRepository,
    InsightComputationRepository,
    InsightsService,
    InsightsStep,
    DimensionRepository,
    DimensionsService,
  ],
  exports: [InsightsService, DimensionsService],
})
export class InsightsModule {}
