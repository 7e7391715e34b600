import { Module } from '@nestjs/common';
import { AuthModule } from '@app/auth/auth.module';
import { MetricsModule } from '@app/common/metrics/metrics.module';
import { RateLimitModule } from '@app/common/rate-limit/rate-limit.module';
import { RollupsController } from './rollups.controller';
import { RollupComputationRepository } from './rollup-computation.repository';
import { RollupRepository } from './rollup.repository';
import { RollupsScheduler } from './rollups.scheduler';
import { RollupsService } from './rollups.service';
import { RezoneRepository } from './rezone.repository';
import { RezoneService } from './rezone.service';
import { RollupSteps } from './rollup-steps';
import { ReadsModule } from '@app/common/reads/reads.module';

@Module({
  imports: [ReadsModule, AuthModule, RateLimitModule, MetricsModule],
  controllers: [RollupsController],
  providers: [
    RollupSteps,
    RollupRepository,
    RollupComputationRepository,
    RezoneRepository,
    RezoneService,
    RollupsService,
    RollupsScheduler,
  ],
  exports: [RollupsService, RollupSteps],
})
export class RollupsModule {}
