import { Module } from '@nestjs/common';
import { AuthModule } from '@app/auth/auth.module';
import { RateLimitModule } from '@app/common/rate-limit/rate-limit.module';
import { InsightsController } from './insights.controller';
import { InsightsCoreModule } from './insights-core.module';

@Module({
  imports: [InsightsCoreModule, AuthModule, RateLimitModule],
  controllers: [InsightsController],
  exports: [InsightsCoreModule],
})
export class InsightsModule {}
