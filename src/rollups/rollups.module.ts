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
import { CursorSecretRepository } from '@app/common/reads/cursor-secret.repository';

@Module({
  imports: [AuthModule, RateLimitModule, MetricsModule],
  controllers: [RollupsController],
  providers: [
    RollupRepository,
    RollupComputationRepository,
    RezoneRepository,
    RezoneService,
    RollupsService,
    RollupsScheduler,
    CursorSecretRepository,
  ],
  exports: [RollupsService],
})
export class RollupsModule {}
