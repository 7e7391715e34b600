import { Module } from '@nestjs/common';
import { MetricsModule } from '@app/common/metrics/metrics.module';
import { PlanChangeListener } from './plan-change.listener';
import { PlanEnforcement } from './plan-enforcement';
import { PlansRepository } from './plans.repository';
import { PlansService } from './plans.service';
import { QuarantineRepository } from './quarantine.repository';
import { QuarantineService } from './quarantine.service';
import { QualityRepository } from './quality.repository';
import { QualityService } from './quality.service';
import { ReadsModule } from '@app/common/reads/reads.module';

/**
 * Tracking plans: the stored versions, each app's compiled plan (dropped on every instance by
 * LISTEN/NOTIFY when a version is stored), the gate ingest applies, and the quarantine. Its HTTP
 * endpoints live in the ingest module, whose path the dry run and the replay share.
 */
@Module({
  imports: [ReadsModule, MetricsModule],
  providers: [
    PlansRepository,
    PlansService,
    PlanChangeListener,
    PlanEnforcement,
    QuarantineRepository,
    QuarantineService,
    QualityRepository,
    QualityService,
  ],
  exports: [PlansService, PlanEnforcement, QuarantineRepository, QuarantineService, QualityService],
})
export class PlansModule {}
