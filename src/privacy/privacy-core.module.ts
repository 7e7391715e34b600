import { Module } from '@nestjs/common';
import { AuthCoreModule } from '@app/auth/auth-core.module';
import { MetricsModule } from '@app/common/metrics/metrics.module';
import { ReadsModule } from '@app/common/reads/reads.module';
import { UserSuppressionsModule } from '@app/common/suppressions/user-suppressions.module';
import { PlansCoreModule } from '@app/plans/plans-core.module';
import { RollupsCoreModule } from '@app/rollups/rollups-core.module';
import { StorageCoreModule } from '@app/storage/storage-core.module';
import { DeletionRepository } from './deletion.repository';
import { DeletionRunner } from './deletion-runner';
import { DeletionsService } from './deletions.service';
import {
  AppEventsErasureStep,
  AppRowsErasureStep,
  ERASURE_STEPS,
  EventsErasureStep,
  QuarantineErasureStep,
  RollupsErasureStep,
  type ErasureSteps,
} from './erasure-steps';
import { EventErasureRepository } from './event-erasure.repository';
import { PrivacyMetrics } from './privacy.metrics';
import { SuppressionRepository } from './suppression.repository';
import { SuppressionsService } from './suppressions.service';

/**
 * Deletions, their erasure steps and the suppression list, without HTTP or the listener that runs
 * them (PrivacyModule): what the service and the admin CLI share. The erasure steps run in the
 * order of ERASURE_STEPS: events and the quarantine first, rollups last (they are recomputed from
 * what remains). A store that holds event rows adds its step before `rollups`.
 */
@Module({
  imports: [
    ReadsModule,
    AuthCoreModule,
    MetricsModule,
    UserSuppressionsModule,
    RollupsCoreModule,
    StorageCoreModule,
    PlansCoreModule,
  ],
  providers: [
    DeletionRepository,
    DeletionRunner,
    EventErasureRepository,
    SuppressionRepository,
    SuppressionsService,
    DeletionsService,
    PrivacyMetrics,
    EventsErasureStep,
    QuarantineErasureStep,
    RollupsErasureStep,
    AppEventsErasureStep,
    AppRowsErasureStep,
    {
      provide: ERASURE_STEPS,
      useFactory: (
        events: EventsErasureStep,
        quarantine: QuarantineErasureStep,
        rollups: RollupsErasureStep,
        appEvents: AppEventsErasureStep,
        appRows: AppRowsErasureStep,
      ): ErasureSteps => ({ users: [events, quarantine, rollups], app: [appEvents, appRows] }),
      inject: [
        EventsErasureStep,
        QuarantineErasureStep,
        RollupsErasureStep,
        AppEventsErasureStep,
        AppRowsErasureStep,
      ],
    },
  ],
  // DeletionRunner is for whatever runs the deletions: the service's listener (PrivacyModule) or
  // the CLI's `--wait` and ledger replay.
  exports: [DeletionsService, SuppressionsService, PrivacyMetrics, DeletionRunner],
})
export class PrivacyCoreModule {}
