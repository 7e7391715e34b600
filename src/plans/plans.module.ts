import { Module } from '@nestjs/common';
import { AuthModule } from '@app/auth/auth.module';
import { RateLimitModule } from '@app/common/rate-limit/rate-limit.module';
import { IngestModule } from '@app/ingest/ingest.module';
import { PlanChangeListener } from './plan-change.listener';
import { PlanController } from './plan.controller';
import { PlansCoreModule } from './plans-core.module';
import { QuarantineController } from './quarantine.controller';
import { QuarantineMaintenanceJob } from './quarantine-maintenance.job';
import { QuarantineReplayModule } from './quarantine-replay.module';

/**
 * Tracking plans: the stored versions, each app's compiled plan (dropped on every instance by
 * LISTEN/NOTIFY when a version is stored), the gate ingest applies (through the port of
 * `IngestPlansModule`), and the quarantine. Its endpoints read their bodies with ingest's reader;
 * the dry run is ingest's own evaluation, and the replay writes through ingest's insert.
 */
@Module({
  imports: [PlansCoreModule, QuarantineReplayModule, IngestModule, AuthModule, RateLimitModule],
  controllers: [PlanController, QuarantineController],
  providers: [PlanChangeListener, QuarantineMaintenanceJob],
  exports: [PlansCoreModule],
})
export class PlansModule {}
