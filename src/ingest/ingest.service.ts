import { DEFAULT_TIME_ZONE } from '@app/common/timezones';
import { Inject, Injectable } from '@nestjs/common';
import { AppError } from '@app/common/app-error';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import type { RequestKey } from '@app/auth/authenticated-request';
import { RateLimitStore, retryAfterSeconds } from '@app/common/rate-limit/rate-limit.store';
import { MetricsService } from '@app/common/metrics/metrics.service';
import { UserSuppressions } from '@app/common/suppressions/user-suppressions';
import type { IngestBody } from './ingest-body.reader';
import { CpuMeter } from './ingest-cpu.budget';
import { IngestWriter } from './ingest-writer';
import type { AcceptedEvent, IngestResult } from './ingest.types';
import { pseudonymise } from './pii';
import { EventNameBound } from './event-name-bound';
import { INGEST_PLANS, type IngestPlans } from '@app/common/plans/ingest-plans.port';
import {
  keptEvent,
  keptRejections,
  NATIVE,
  rejectedRef,
  type IngestOptions,
  type RejectedItem,
} from './kept-rejections';
import { BatchEvaluator, QUARANTINE_FULL, type PreparedBatch } from './batch-evaluator';

/** The ingest rules of docs/ingest.md: the event rate, the batch's evaluation, the write, metering. */
@Injectable()
export class IngestService {
  constructor(
    @Inject(APP_CONFIG)
    private readonly config: ConfigSlice<'ingestRateEvents' | 'rateWindowMs' | 'quarantineMaxEventsPerDay'>,
    private readonly limits: RateLimitStore,
    private readonly evaluator: BatchEvaluator,
    private readonly writer: IngestWriter,
    private readonly metrics: MetricsService,
    private readonly eventNames: EventNameBound,
    private readonly suppressions: UserSuppressions,
    @Inject(INGEST_PLANS) private readonly plans: IngestPlans,
  ) {}

  async ingest(
    key: RequestKey,
    body: IngestBody,
    cpu = new CpuMeter(),
    options: IngestOptions = NATIVE,
  ): Promise<IngestResult> {
    const envelope = this.evaluator.envelope(body);
    await this.checkEventRate(key.id, envelope.events.length);
    const batch = await this.evaluator.prepare(key, envelope, {
      appId: key.appIds[0],
      names: (appId, receivedAt) => this.eventNames.forApp(appId, receivedAt),
    });
    const { appId, receivedAt } = batch;
    // The validation is the key's CPU (INGEST_CPU_MS_PER_SECOND), whatever it accepts or rejects.
    const verdict = await cpu.timeSliced((slices) =>
      this.evaluator.judge(batch, options.keepRejected, slices),
    );
    // The rest is mostly waiting for the database: the key's next request may start its work.
    cpu.endTurn();

    const { toStore, rejected, kept } = verdict;
    let { duplicates } = verdict;
    let accepted = toStore.length;
    if (toStore.length) {
      const timezone = key.timezone ?? DEFAULT_TIME_ZONE;
      const repeated = await this.writer.write({ appId, receivedAt, events: toStore, timezone });
      duplicates += repeated.length;
      accepted -= repeated.length;
    }
    await this.settle(batch, accepted, duplicates, options);
    if (kept.length) await this.keepRejected(batch, kept, cpu);
    return this.evaluator.result(batch, body, { accepted, duplicates, rejected });
  }

  /**
   * After the write: the metrics, and the plan's verdicts (quarantine, data-quality counts); a
   * rejected event the quarantine had no room for gets the warning `quarantine_full`.
   */
  private async settle(
    batch: PreparedBatch,
    accepted: number,
    duplicates: number,
    options: IngestOptions,
  ): Promise<void> {
    const { appId, receivedAt, validator, gate, testMode } = batch;
    const suppressed = validator.rejectedByCode.user_suppressed;
    if (suppressed) this.suppressions.countSuppressed(suppressed);
    const rejectedByCode = validator.rejectedByCode;
    this.metrics.recordIngest({ accepted, duplicates, testMode, rejectedByCode, source: options.source });
    if (gate === null) return;
    for (const { event } of await this.plans.settle(appId, receivedAt, gate)) {
      validator.noteRejected(event, QUARANTINE_FULL);
    }
  }

  /**
   * Keeps the request's rejected events in the quarantine with their codes (the SDK formats,
   * whose clients never read per-event results), within the app's daily bound.
   */
  private async keepRejected(batch: PreparedBatch, items: RejectedItem[], cpu: CpuMeter): Promise<void> {
    const { appId, receivedAt, secret, testMode } = batch;
    const { validator } = batch;
    const max = this.config.quarantineMaxEventsPerDay;
    if (this.plans.quarantineFull(appId, receivedAt, max)) {
      // No room today: nothing to build or write, each event only gets its warning.
      for (const item of items) validator.noteRejected(rejectedRef(item) as AcceptedEvent, QUARANTINE_FULL);
      this.metrics.recordQuarantineDropped(items.length);
      return;
    }
    cpu.chargeQuarantineRows(items.length);
    const build = (raw: unknown) =>
      keptEvent(raw, receivedAt, testMode, (kind, value) => pseudonymise(secret, kind, value));
    const rejections = await keptRejections(items, validator.errors, build);
    const kept = await this.plans.keep(appId, receivedAt, rejections, max);
    this.metrics.recordQuarantineDropped(rejections.length - kept);
    for (const { event } of rejections.slice(kept)) {
      validator.noteRejected(event as AcceptedEvent, QUARANTINE_FULL);
    }
  }

  /** The per-key event rate. Counted before validation: every received event costs. */
  private async checkEventRate(keyId: string, count: number): Promise<void> {
    const limit = this.config.ingestRateEvents;
    const window = await this.limits.hit(`events:${keyId}`, count, this.config.rateWindowMs);
    if (window.count > limit) {
      throw new AppError(
        'rate_limited',
        `More than ${limit} events in ${this.config.rateWindowMs} ms for this key; nothing was stored.`,
        {
          headers: { 'Retry-After': String(retryAfterSeconds(window)) },
          extra: { limitEvents: limit, windowMs: this.config.rateWindowMs },
        },
      );
    }
  }
}
