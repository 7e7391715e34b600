import { DEFAULT_TIME_ZONE } from '@app/common/timezones';
import { Inject, Injectable } from '@nestjs/common';
import { AppError, FieldError } from '@app/common/app-error';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { AppsService } from '@app/auth/apps.service';
import type { RequestKey } from '@app/auth/authenticated-request';
import { RateLimitStore, retryAfterSeconds } from '@app/common/rate-limit/rate-limit.store';
import { MetricsService } from '@app/common/metrics/metrics.service';
import { UserSuppressions } from '@app/common/suppressions/user-suppressions';
import { EventValidator } from './event-validator';
import type { IngestBody } from './ingest-body.reader';
import { CpuMeter } from './ingest-cpu.budget';
import { BatchLimits, batchTooLarge } from './ingest-errors';
import { CLOCK_SKEW_TOLERANCE_MS, dedupWindowMs, maxEventsPerRequest } from './ingest.limits';
import { IngestWriter } from './ingest-writer';
import type { AcceptedEvent, IngestResult } from './ingest.types';
import { pseudonymise } from './pii';
import { EventNameBound, type EventNameAdmission } from './event-name-bound';
import { PlansService } from '@app/plans/plans.service';
import { PlanEnforcement } from '@app/plans/plan-enforcement';
import type { CompiledPlan } from '@app/plans/compiled-plan';
import type { PlanGate } from '@app/plans/plan-gate';
import { DedupService } from './dedup.service';
import { QuarantineService } from '@app/plans/quarantine.service';
import {
  isKept,
  keptEvent,
  keptRejections,
  NATIVE,
  RejectionCodes,
  type IngestOptions,
  type RejectedItem,
} from './kept-rejections';

/** A dry run (POST /api/v1/plan/check): the result ingest would give; nothing stored, counted or metered. */
export interface DryRun {
  appId: string;
  /** The plan to apply instead of the stored one. */
  plan?: CompiledPlan;
}

/**
 * The day's event-name bound, after the field rules and suppressions and before the tracking
 * plan: admitting a name counts it, and an event the plan rejects is still kept (the quarantine)
 * and counted (the data-quality rows), so its name must be within the bound too.
 */
function nameAdmitted(
  validator: EventValidator,
  names: EventNameAdmission | undefined,
  event: AcceptedEvent,
): boolean {
  if (names === undefined || names.admit(event.eventName, event.ts)) return true;
  validator.rejectLater(event, [
    { field: 'eventName', code: 'too_many_event_names', message: names.message },
  ]);
  return false;
}

const QUARANTINE_FULL = {
  field: 'eventName',
  code: 'quarantine_full',
  message:
    "The app's quarantine is full for today (QUARANTINE_MAX_EVENTS_PER_DAY): this rejected event " +
    'was counted but not kept for replay.',
} as const;

interface Envelope {
  events: unknown[];
  sentAt: number | null;
}

/** Checks the batch envelope: 400 with field errors, or 413 for too many events. */
function parseEnvelope(value: unknown, bytes: number, config: BatchLimits): Envelope {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalidBody([{ field: 'body', code: 'invalid_type', message: 'The body must be a JSON object.' }]);
  }
  const body = value as Record<string, unknown>;
  const errors: FieldError[] = [];
  const events = body.events;
  if (events === undefined || events === null) {
    errors.push({ field: 'events', code: 'missing_field', message: 'events is required.' });
  } else if (!Array.isArray(events)) {
    errors.push({ field: 'events', code: 'invalid_type', message: 'events must be an array.' });
  } else if (events.length === 0) {
    errors.push({ field: 'events', code: 'invalid_value', message: 'events must hold at least one event.' });
  }
  let sentAt: number | null = null;
  const s = body.sentAt;
  if (s !== undefined && s !== null) {
    if (typeof s !== 'number') {
      errors.push({
        field: 'sentAt',
        code: 'invalid_type',
        message: 'sentAt must be an integer of epoch milliseconds.',
      });
    } else if (!Number.isSafeInteger(s) || s < 0) {
      errors.push({
        field: 'sentAt',
        code: 'invalid_value',
        message: 'sentAt must be a whole number of epoch milliseconds, at least 0.',
      });
    } else {
      sentAt = s;
    }
  }
  // Too many events is reported before other envelope problems: the client must split anyway.
  const max = maxEventsPerRequest(config);
  if (Array.isArray(events) && events.length > max) {
    throw batchTooLarge(
      config,
      { events: events.length, bytes },
      `The batch holds ${events.length} events; the limit is ${max}.`,
    );
  }
  if (errors.length) throw invalidBody(errors);
  return { events: events as unknown[], sentAt };
}

function invalidBody(errors: FieldError[]): AppError {
  return new AppError('invalid_body', 'The batch envelope is invalid; nothing was stored.', { errors });
}

/** The ingest rules of docs/ingest.md: validation, time, PII, dedup, metering. */
/** A batch read and ready to judge: its events and the rules of its app and key. */
interface PreparedBatch {
  events: unknown[];
  appId: string;
  receivedAt: number;
  secret: Buffer;
  testMode: boolean;
  validator: EventValidator;
  names: ReturnType<EventNameBound['forApp']> | undefined;
  gate: PlanGate<AcceptedEvent> | null;
}

/** What became of a batch's events before the write. */
interface BatchVerdict {
  toStore: AcceptedEvent[];
  rejected: number;
  duplicates: number;
  /** Rejected events to keep in the quarantine whatever the plan's mode (SDK formats). */
  kept: RejectedItem[];
}

@Injectable()
export class IngestService {
  constructor(
    @Inject(APP_CONFIG)
    private readonly config: BatchLimits &
      ConfigSlice<
        | 'ingestMaxEventAgeDays'
        | 'ingestMaxEventBytes'
        | 'piiPolicy'
        | 'ingestMaxErrorsListed'
        | 'rateWindowMs'
        | 'quarantineMaxEventsPerDay'
      >,
    private readonly limits: RateLimitStore,
    private readonly apps: AppsService,
    private readonly writer: IngestWriter,
    private readonly metrics: MetricsService,
    private readonly eventNames: EventNameBound,
    private readonly suppressions: UserSuppressions,
    private readonly plans: PlansService,
    private readonly enforcement: PlanEnforcement,
    private readonly dedup: DedupService,
    private readonly quarantine: QuarantineService,
  ) {}

  async ingest(
    key: RequestKey,
    body: IngestBody,
    cpu = new CpuMeter(),
    dryRun?: DryRun,
    options: IngestOptions = NATIVE,
  ): Promise<IngestResult> {
    const batch = await this.prepare(key, body, dryRun);
    const { appId, receivedAt, validator, testMode } = batch;
    // The validation is the key's CPU (INGEST_CPU_MS_PER_SECOND), whatever it accepts or rejects.
    const validating = cpu.start();
    const verdict = this.evaluate(batch, options.keepRejected && !dryRun);
    cpu.stop(validating);
    // The rest is mostly waiting for the database: the key's next request may start its work.
    cpu.endTurn();

    const { toStore, rejected, kept } = verdict;
    let { duplicates } = verdict;
    let accepted = toStore.length;
    if (toStore.length) {
      const timezone = key.timezone ?? DEFAULT_TIME_ZONE;
      const repeated = dryRun
        ? await this.dedup.alreadySeen(appId, receivedAt, toStore)
        : await this.writer.write({ appId, receivedAt, events: toStore, timezone });
      duplicates += repeated.length;
      accepted -= repeated.length;
    }
    if (!dryRun) {
      await this.settle(appId, receivedAt, validator, batch.gate, accepted, duplicates, testMode, options);
      if (kept.length) {
        cpu.chargeQuarantineRows(kept.length);
        await this.keepRejected(appId, receivedAt, validator, kept, batch.secret, testMode);
      }
    }
    return {
      received: batch.events.length,
      accepted,
      duplicates,
      rejected,
      // Metering follows the key, not the event: a live key's `isTestMode: true` still separates
      // the data, but it is billed, so a flag in the body cannot evade billing.
      metered: testMode ? 0 : accepted,
      testMode,
      payloadBytes: body.bytes,
      serverTime: receivedAt,
      errors: validator.errors,
      warnings: validator.warnings,
      errorCounts: validator.errorCounts,
      warningCounts: validator.warningCounts,
    };
  }

  /** The batch's events, and the rules that apply to them: the app's plan, its secret, the validator. */
  private async prepare(key: RequestKey, body: IngestBody, dryRun?: DryRun): Promise<PreparedBatch> {
    const { events, sentAt } = parseEnvelope(body.value, body.bytes, this.config);
    if (!dryRun) await this.checkEventRate(key.id, events.length);

    const appId = dryRun?.appId ?? key.appIds[0];
    // The plan that applies (a dry run's, else the app's), then the receive time: a plan's first
    // compile (after a change or a restart) can take seconds, and the receive time starts the
    // commit budget (commitWithinMs), which waiting for the compile must not use up.
    const plan = dryRun?.plan ?? (await this.plans.active(appId));
    const receivedAt = Date.now();
    const secret = await this.apps.piiSecret(appId);
    const testMode = key.mode === 'test';
    const skew = sentAt === null ? 0 : receivedAt - sentAt;
    const validator = new EventValidator({
      receivedAt,
      skewMs: Math.abs(skew) > CLOCK_SKEW_TOLERANCE_MS ? skew : 0,
      oldestTs: receivedAt - dedupWindowMs(this.config),
      maxEventBytes: this.config.ingestMaxEventBytes,
      piiPolicy: this.config.piiPolicy,
      forceTestMode: testMode,
      pseudonymise: (kind, value) => pseudonymise(secret, kind, value),
      maxIssuesListed: this.config.ingestMaxErrorsListed,
      suppressed: this.suppressions.matcher(appId),
    });
    // A dry run leaves the day's name bound alone: it depends on what the day has stored.
    const names = dryRun ? undefined : this.eventNames.forApp(appId, receivedAt);
    // The tracking plan, after the field rules and the PII guard; null when none applies.
    const gate = this.plans.gate<AcceptedEvent>(plan, validator);
    return { events, appId, receivedAt, secret, testMode, validator, names, gate };
  }

  /** Each event through the field rules, the name bound and the plan; repeats within the batch. */
  private evaluate(batch: PreparedBatch, keepRejected: boolean | undefined): BatchVerdict {
    const { events, validator, names, gate } = batch;
    const toStore: AcceptedEvent[] = [];
    const seen = new Set<string>();
    const codes = keepRejected ? new RejectionCodes() : null;
    const kept: RejectedItem[] = [];
    let rejected = 0;
    let duplicates = 0;
    for (let i = 0; i < events.length; i++) {
      const event = validator.validate(events[i], i);
      if (event === null || !nameAdmitted(validator, names, event) || (gate !== null && !gate.admit(event))) {
        rejected++;
        const code = codes?.next(validator.rejectedByCode);
        if (code && isKept(code)) kept.push({ index: i, code, raw: events[i], event });
      } else if (event.eventId !== null && seen.has(event.eventId)) {
        // A repeat within the batch: the first copy wins.
        duplicates++;
      } else {
        if (event.eventId !== null) seen.add(event.eventId);
        toStore.push(event);
      }
    }
    return { toStore, rejected, duplicates, kept };
  }

  /**
   * After the write: the metrics, and the plan's verdicts (quarantine, data-quality counts); a
   * rejected event the quarantine had no room for gets the warning `quarantine_full`.
   */
  private async settle(
    appId: string,
    receivedAt: number,
    validator: EventValidator,
    gate: PlanGate<AcceptedEvent> | null,
    accepted: number,
    duplicates: number,
    testMode: boolean,
    options: IngestOptions,
  ): Promise<void> {
    const suppressed = validator.rejectedByCode.user_suppressed;
    if (suppressed) this.suppressions.countSuppressed(suppressed);
    const rejectedByCode = validator.rejectedByCode;
    this.metrics.recordIngest({ accepted, duplicates, testMode, rejectedByCode, source: options.source });
    if (gate === null) return;
    for (const { event } of await this.enforcement.settle(appId, receivedAt, gate)) {
      validator.noteRejected(event, QUARANTINE_FULL);
    }
  }

  /**
   * Keeps the request's rejected events in the quarantine with their codes (the SDK formats,
   * whose clients never read per-event results), within the app's daily bound.
   */
  private async keepRejected(
    appId: string,
    receivedAt: number,
    validator: EventValidator,
    items: RejectedItem[],
    secret: Buffer,
    testMode: boolean,
  ): Promise<void> {
    const build = (raw: unknown) =>
      keptEvent(raw, receivedAt, testMode, (kind, value) => pseudonymise(secret, kind, value));
    const rejections = keptRejections(items, validator.errors, build);
    const max = this.config.quarantineMaxEventsPerDay;
    const kept = await this.quarantine.keep(appId, receivedAt, rejections, max);
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
