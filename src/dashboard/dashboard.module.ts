import { Module } from '@nestjs/common';
import { DashboardAssets } from './dashboard-assets';
import { DashboardController } from './dashboard.controller';

/** The read-only web dashboard, mounted only when DASHBOARD_ENABLED is true. */
@Module({
  controllers: [DashboardController],
  providers: [DashboardAssets],
})
export class DashboardModule {}
