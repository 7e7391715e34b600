import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { MetricsService } from '@app/common/metrics/metrics.service';
import type { PlanGate, Rejection } from './plan-gate';
import { QualityService } from './quality.service';
import { QuarantineService } from './quarantine.service';
import type { QuarantineEvent } from './quarantine.types';

/** What ingest does with a request's plan verdicts once its accepted events are stored. */
@Injectable()
export class PlanEnforcement {
  constructor(
    @Inject(APP_CONFIG) private readonly config: ConfigSlice<'quarantineMaxEventsPerDay'>,
    private readonly quarantine: QuarantineService,
    private readonly metrics: MetricsService,
    private readonly quality: QualityService,
  ) {}

  /**
   * Counts the violations (metrics, data-quality counts) and keeps the rejected events in the
   * quarantine while the app's day has room (QUARANTINE_MAX_EVENTS_PER_DAY). Returns the
   * rejections it had no room for: they are counted, not kept.
   */
  async settle<E extends QuarantineEvent>(
    appId: string,
    receivedAt: number,
    gate: PlanGate<E>,
  ): Promise<Rejection<E>[]> {
    this.metrics.recordPlanViolations(gate.violations);
    this.quality.add(appId, receivedAt, gate);
    const { rejected } = gate;
    const kept = await this.quarantine.keep(
      appId,
      receivedAt,
      rejected,
      this.config.quarantineMaxEventsPerDay,
    );
    const dropped = rejected.slice(kept);
    this.metrics.recordQuarantineDropped(dropped.length);
    return dropped;
  }
}
