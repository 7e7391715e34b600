import { Injectable } from '@nestjs/common';
import { MetricsService } from '@app/common/metrics/metrics.service';
import type { PlanGate } from './plan-gate';
import { QualityService } from './quality.service';
import { QuarantineRepository } from './quarantine.repository';
import type { QuarantineEvent } from './quarantine.types';

/** What ingest does with a request's plan verdicts once its accepted events are stored. */
@Injectable()
export class PlanEnforcement {
  constructor(
    private readonly quarantine: QuarantineRepository,
    private readonly metrics: MetricsService,
    private readonly quality: QualityService,
  ) {}

  /** Counts the violations (metrics, data-quality counts) and keeps the rejected events in the quarantine. */
  async settle(appId: string, receivedAt: number, gate: PlanGate<QuarantineEvent>): Promise<void> {
    this.metrics.recordPlanViolations(gate.violations);
    this.quality.add(appId, receivedAt, gate);
    await this.quarantine.insert(appId, receivedAt, gate.rejected);
  }
}
