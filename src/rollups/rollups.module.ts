import { Module } from '@nestjs/common';
import { AuthModule } from '@app/auth/auth.module';
import { MetricsModule } from '@app/common/metrics/metrics.module';
import { RateLimitModule } from '@app/common/rate-limit/rate-limit.module';
import { RollupsController } from './rollups.controller';
import { RollupsScheduler } from './rollups.scheduler';
import { RollupsCoreModule } from './rollups-core.module';

@Module({
  imports: [RollupsCoreModule, AuthModule, RateLimitModule, MetricsModule],
  controllers: [RollupsController],
  providers: [RollupsScheduler],
  exports: [RollupsCoreModule],
})
export class RollupsModule {}
