import { Module } from '@nestjs/common';
import { PlanChangeListener } from './plan-change.listener';
import { PlansCoreModule } from './plans-core.module';
import { QuarantineMaintenanceJob } from './quarantine-maintenance.job';

/**
 * Tracking plans: the stored versions, each app's compiled plan (dropped on every instance by
 * LISTEN/NOTIFY when a version is stored), the gate ingest applies, and the quarantine. Its HTTP
 * endpoints live in the ingest module, whose path the dry run and the replay share.
 */
@Module({
  imports: [PlansCoreModule],
  providers: [PlanChangeListener, QuarantineMaintenanceJob],
  exports: [PlansCoreModule],
})
export class PlansModule {}
