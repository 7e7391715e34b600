import { Module } from '@nestjs/common';
import { AuthModule } from '@app/auth/auth.module';
import { MetricsModule } from '@app/common/metrics/metrics.module';
import { ReadsModule } from '@app/common/reads/reads.module';
import { RateLimitModule } from '@app/common/rate-limit/rate-limit.module';
import { UserSuppressionsModule } from '@app/common/suppressions/user-suppressions.module';
import { RollupsModule } from '@app/rollups/rollups.module';
import { StorageModule } from '@app/storage/storage.module';
import { DeletionRepository } from './deletion.repository';
import { DeletionsController } from './deletions.controller';
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
import { PlansModule } from '@app/plans/plans.module';
import { EventErasureRepository } from './event-erasure.repository';
import { PrivacyListener } from './privacy.listener';
import { PrivacyMetrics } from './privacy.metrics';
import { SuppressionRepository } from './suppression.repository';
import { SuppressionsService } from './suppressions.service';

/**
 * Erasure of users' data and the suppression list (docs/security.md, "Privacy"). The erasure
 * steps run in the order of ERASURE_STEPS: events and the quarantine first, rollups last (they are recomputed from
 * what remains). A store that holds event rows adds its step before `rollups`.
 */
@Module({
  imports: [
    ReadsModule,
    AuthModule,
    RateLimitModule,
    MetricsModule,
    UserSuppressionsModule,
    RollupsModule,
    StorageModule,
    PlansModule,
  ],
  controllers: [DeletionsController],
  providers: [
    DeletionRepository,
    EventErasureRepository,
    SuppressionRepository,
    SuppressionsService,
    DeletionsService,
    PrivacyMetrics,
    PrivacyListener,
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
})
export class PrivacyModule {}
