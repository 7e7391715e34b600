import { Inject, Injectable } from '@nestjs/common';
import { AppError, FieldError } from '@app/common/app-error';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { AppsService } from '@app/auth/apps.service';
import type { RequestKey } from '@app/auth/authenticated-request';
import { UserSuppressions } from '@app/common/suppressions/user-suppressions';
import { WorkSlices } from '@app/common/work-slices';
import {
  INGEST_PLANS,
  type AppliedPlan,
  type IngestPlans,
  type RequestGate,
} from '@app/common/plans/ingest-plans.port';
import { EventValidator } from './event-validator';
import type { IngestBody } from './ingest-body.reader';
import { BatchLimits, batchTooLarge } from './ingest-errors';
import { CLOCK_SKEW_TOLERANCE_MS, dedupWindowMs, maxEventsPerRequest } from './ingest.limits';
import type { AcceptedEvent, IngestResult } from './ingest.types';
import { pseudonymise } from './pii';
import type { EventNameAdmission } from './event-name-bound';
import { isKept, RejectionCodes, type RejectedItem } from './kept-rejections';

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

/** The warning of a rejected event that was counted but found no room in the app's quarantine. */
export const QUARANTINE_FULL = {
  field: 'eventName',
  code: 'quarantine_full',
  message:
    "The app's quarantine is full for today (QUARANTINE_MAX_EVENTS_PER_DAY): this rejected event " +
    'was counted but not kept for replay.',
} as const;

/** A batch's envelope: its events and the sender's clock. */
export interface Envelope {
  events: unknown[];
  sentAt: number | null;
}

/** Checks the batch envelope: 400 with field errors, or 413 for too many events. */
export function parseEnvelope(value: unknown, bytes: number, config: BatchLimits): Envelope {
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

/** A batch read and ready to judge: its events and the rules of its app and key. */
export interface PreparedBatch {
  events: unknown[];
  appId: string;
  receivedAt: number;
  secret: Buffer;
  testMode: boolean;
  validator: EventValidator;
  names: EventNameAdmission | undefined;
  gate: RequestGate<AcceptedEvent> | null;
}

/** What became of a batch's events before the write. */
export interface BatchVerdict {
  toStore: AcceptedEvent[];
  rejected: number;
  duplicates: number;
  /** Rejected events to keep in the quarantine whatever the plan's mode (SDK formats). */
  kept: RejectedItem[];
}

/** Which app's rules a batch is judged by, and what of them applies. */
export interface EvaluationScope {
  appId: string;
  /** The plan to apply instead of the app's stored one (a dry run's). */
  plan?: AppliedPlan;
  /** The day's event-name bound; a dry run leaves it alone, since it depends on what the day has stored. */
  names?: (appId: string, receivedAt: number) => EventNameAdmission;
}

/** What a batch's events became, in the metering result's terms. */
export interface BatchCounts {
  accepted: number;
  duplicates: number;
  rejected: number;
}

/**
 * Judging a batch, what ingest and the plan's dry run share: the envelope, the field rules, the
 * PII guard, the time rules, the event-name bound, the tracking plan, and the metering result.
 */
@Injectable()
export class BatchEvaluator {
  constructor(
    @Inject(APP_CONFIG)
    private readonly config: BatchLimits &
      ConfigSlice<'ingestMaxEventAgeDays' | 'ingestMaxEventBytes' | 'piiPolicy' | 'ingestMaxErrorsListed'>,
    private readonly apps: AppsService,
    private readonly suppressions: UserSuppressions,
    @Inject(INGEST_PLANS) private readonly plans: IngestPlans,
  ) {}

  /** The envelope of a body: 400 `invalid_body`, or 413 for too many events. */
  envelope(body: IngestBody): Envelope {
    return parseEnvelope(body.value, body.bytes, this.config);
  }

  /** The batch's events, and the rules that apply to them: the app's plan, its secret, the validator. */
  async prepare(key: RequestKey, envelope: Envelope, scope: EvaluationScope): Promise<PreparedBatch> {
    const { events, sentAt } = envelope;
    const appId = scope.appId;
    // The plan that applies (a dry run's, else the app's), then the receive time: a plan's first
    // compile (after a change or a restart) can take seconds, and the receive time starts the
    // commit budget (commitWithinMs), which waiting for the compile must not use up.
    const plan = scope.plan ?? (await this.plans.active(appId));
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
    const names = scope.names?.(appId, receivedAt);
    // The tracking plan, after the field rules and the PII guard; null when none applies.
    const gate = this.plans.gate<AcceptedEvent>(plan, validator);
    return { events, appId, receivedAt, secret, testMode, validator, names, gate };
  }

  /**
   * Each event through the field rules, the name bound and the plan; repeats within the batch.
   * In slices (`slices`, 5 ms by default): 1,000 events take about 30 ms of the thread, which
   * other requests would otherwise wait out whole.
   */
  async judge(batch: PreparedBatch, keepRejected: boolean, slices = new WorkSlices()): Promise<BatchVerdict> {
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
      if (slices.due) await slices.yield();
    }
    return { toStore, rejected, duplicates, kept };
  }

  /** The metering result of a judged batch. */
  result(batch: PreparedBatch, body: IngestBody, counts: BatchCounts): IngestResult {
    const { validator, testMode } = batch;
    return {
      received: batch.events.length,
      accepted: counts.accepted,
      duplicates: counts.duplicates,
      rejected: counts.rejected,
      // Metering follows the key, not the event: a live key's `isTestMode: true` still separates
      // the data, but it is billed, so a flag in the body cannot evade billing.
      metered: testMode ? 0 : counts.accepted,
      testMode,
      payloadBytes: body.bytes,
      serverTime: batch.receivedAt,
      errors: validator.errors,
      warnings: validator.warnings,
      errorCounts: validator.errorCounts,
      warningCounts: validator.warningCounts,
    };
  }
}
