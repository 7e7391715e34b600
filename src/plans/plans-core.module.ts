import { Module } from '@nestjs/common';
import { MetricsModule } from '@app/common/metrics/metrics.module';
import { ReadsModule } from '@app/common/reads/reads.module';
import { PlanEnforcement } from './plan-enforcement';
import { PlansRepository } from './plans.repository';
import { PlansService } from './plans.service';
import { QuarantineRepository } from './quarantine.repository';
import { QuarantineService } from './quarantine.service';
import { QualityRepository } from './quality.repository';
import { QualityService } from './quality.service';

/**
 * Tracking plans, the gate and the quarantine, without the change listener or the quarantine's
 * upkeep (PlansModule): what the service and the admin CLI share.
 */
@Module({
  imports: [ReadsModule, MetricsModule],
  providers: [
    PlansRepository,
    PlansService,
    PlanEnforcement,
    QuarantineRepository,
    QuarantineService,
    QualityRepository,
    QualityService,
  ],
  exports: [PlansService, PlanEnforcement, QuarantineService, QualityService],
})
export class PlansCoreModule {}
