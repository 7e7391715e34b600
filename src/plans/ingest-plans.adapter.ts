import { Global, Injectable, Module } from '@nestjs/common';
import {
  INGEST_PLANS,
  type AppliedPlan,
  type IngestPlans,
  type IssueSink,
  type PlannedEvent,
  type QuarantineEvent,
  type Rejection,
  type RequestGate,
} from '@app/common/plans/ingest-plans.port';
import type { CompiledPlan } from './compiled-plan';
import { PlanEnforcement } from './plan-enforcement';
import type { PlanGate } from './plan-gate';
import { PlansCoreModule } from './plans-core.module';
import { PlansService } from './plans.service';
import { QuarantineService } from './quarantine.service';

/**
 * The tracking plans as ingest applies them (the port of common/plans). The plans and gates it
 * is handed are the ones it made: `active` and `PlansService.compile` give compiled plans,
 * `gate` gives plan gates.
 */
@Injectable()
export class PlansForIngest implements IngestPlans {
  constructor(
    private readonly plans: PlansService,
    private readonly enforcement: PlanEnforcement,
    private readonly quarantine: QuarantineService,
  ) {}

  active(appId: string): Promise<AppliedPlan | null> {
    return this.plans.active(appId);
  }

  gate<E extends PlannedEvent>(plan: AppliedPlan | null, sink: IssueSink<E>): RequestGate<E> | null {
    return this.plans.gate<E>(plan as CompiledPlan | null, sink);
  }

  settle<E extends QuarantineEvent>(
    appId: string,
    receivedAt: number,
    gate: RequestGate<E>,
  ): Promise<Rejection<E>[]> {
    return this.enforcement.settle(appId, receivedAt, gate as PlanGate<E>);
  }

  keep(
    appId: string,
    receivedAt: number,
    rejected: Rejection<QuarantineEvent>[],
    maxPerDay: number,
  ): Promise<number> {
    return this.quarantine.keep(appId, receivedAt, rejected, maxPerDay);
  }

  quarantineFull(appId: string, receivedAt: number, maxPerDay: number): boolean {
    return this.quarantine.isFull(appId, receivedAt, maxPerDay);
  }
}

/**
 * Provides the port `INGEST_PLANS` to every module, so that ingest's core injects it without
 * importing plans. Imported once by whatever composes the modules (AppModule, the CLI's plans group).
 */
@Global()
@Module({
  imports: [PlansCoreModule],
  providers: [PlansForIngest, { provide: INGEST_PLANS, useExisting: PlansForIngest }],
  exports: [INGEST_PLANS],
})
export class IngestPlansModule {}
