import { Injectable, Logger } from '@nestjs/common';
import { AuditService } from '@app/audit/audit.service';
import type { AuditActor } from '@app/audit/audit.types';
import { AppError } from '@app/common/app-error';
import type { CompiledPlan } from './compiled-plan';
import type { PlanCompilation } from './plan-compiler';
import { IssueSink, PlanGate } from './plan-gate';
import { compilePlanOffThread, isCompileCost, validatePlan } from './plan-worker';
import type { PlannedEvent, PlanProblem, PlanVersion } from './plan.types';
import { PlansRepository } from './plans.repository';

/**
 * How long a compiled plan is trusted without a notification. Changes arrive by LISTEN/NOTIFY
 * within a second; this bounds the staleness only while that channel is down.
 */
export const PLAN_CACHE_TTL_MS = 30_000;
/** When a stored plan's compile failed for a reason other than its content, it is tried again after this. */
const COMPILE_RETRY_MS = 60_000;

interface CacheEntry {
  at: number;
  plan: Promise<CompiledPlan | null>;
  /** The stored version the entry was loaded from (0: none), once known. */
  version: number | null;
}

export function invalidPlan(problems: PlanProblem[]): AppError {
  return new AppError(
    'invalid_plan',
    `The tracking plan has ${problems.length} problem(s); nothing was stored.`,
    {
      extra: { problems },
    },
  );
}

/** Parses an `If-Match` header: a version (`"3"`, `3`, `W/"3"`), `*` for any, or undefined when absent. */
export function parseIfMatch(header: string | undefined): number | '*' | undefined {
  if (header === undefined) return undefined;
  const value = header.trim();
  if (value === '*') return '*';
  const m = /^(?:W\/)?"?(\d{1,9})"?$/.exec(value);
  if (!m) {
    throw new AppError('invalid_header', 'If-Match must be the ETag of the plan, e.g. "3".', {
      errors: [{ field: 'If-Match', code: 'invalid_format', message: 'If-Match must be a quoted version.' }],
    });
  }
  return Number(m[1]);
}

/** The tracking plans: the stored versions, their validation, and each app's compiled plan. */
@Injectable()
export class PlansService {
  private readonly cache = new Map<string, CacheEntry>();
  private readonly logger = new Logger('PlansService');
  /** The version of each app's stored plan last reported as not applied, so that it is logged once. */
  private readonly reported = new Map<string, number>();

  constructor(
    private readonly plans: PlansRepository,
    private readonly audit: AuditService,
  ) {}

  /** The app's current plan; version 0 and mode `off` when it has none. */
  async get(appId: string): Promise<PlanVersion> {
    const row = await this.plans.current(appId);
    if (!row)
      return { appId, version: 0, plan: { mode: 'off', unplanned: 'allow', events: {} }, createdAt: null };
    return { appId, version: row.version, plan: row.plan, createdAt: row.createdAt };
  }

  /**
   * Stores a new version when `ifMatch` names the current one: 428 without it, 412 when stale,
   * 400 `invalid_plan` with every problem. The audit entry (`plan.updated`) commits with it.
   */
  async put(
    appId: string,
    ifMatch: number | '*' | undefined,
    raw: unknown,
    actor: AuditActor,
  ): Promise<PlanVersion> {
    if (ifMatch === undefined) {
      throw new AppError(
        'precondition_required',
        'Send If-Match with the ETag of the plan you read (GET /api/v1/plan).',
      );
    }
    // Checked in full, its schemas compiled in the compiler's process; nothing of the compile is kept here.
    const checked = await validatePlan(raw);
    if (!checked.ok) throw invalidPlan(checked.problems);
    const mode = checked.plan.mode;
    const row = await this.plans.insertNext(
      appId,
      ifMatch === '*' ? null : ifMatch,
      checked.plan,
      checked.planJson,
      (manager, version) =>
        this.audit.record(
          { action: 'plan.updated', actor, appId, targetId: String(version), details: { version, mode } },
          manager,
        ),
    );
    if (!row) {
      const current = await this.plans.current(appId);
      throw new AppError(
        'version_conflict',
        `The plan is at version ${current?.version ?? 0}, not ${String(ifMatch)}: read it again and reapply the change.`,
        { extra: { currentVersion: current?.version ?? 0 } },
      );
    }
    this.forget(appId);
    return { appId, version: row.version, plan: row.plan, createdAt: row.createdAt };
  }

  /** Records a quarantine replay in the audit log: the filters and the counts. */
  recordReplay(
    appId: string,
    actor: AuditActor,
    details: Record<string, number | string | null>,
  ): Promise<void> {
    return this.audit.record({ action: 'quarantine.replayed', actor, appId, details });
  }

  /** Compiles a plan sent with a request (the dry run): 400 `invalid_plan` when it is not valid. */
  async compile(raw: unknown): Promise<CompiledPlan> {
    const compiled = await compilePlanOffThread(raw, 0, 'request');
    if (!compiled.ok) throw invalidPlan(compiled.problems);
    return compiled.compiled;
  }

  /**
   * The gate that applies `plan` (the app's, from `active`, or a dry run's) to one request's
   * events, reporting to `sink`; null when no plan applies, so that ingest pays nothing per event.
   */
  gate<E extends PlannedEvent>(plan: CompiledPlan | null, sink: IssueSink<E>): PlanGate<E> | null {
    return plan !== null && plan.active ? new PlanGate<E>(plan, sink) : null;
  }

  /**
   * The plan ingest applies to the app: null when it has none or its mode is `off`. Compiled
   * once per version and instance, and dropped when any instance stores a new version.
   */
  active(appId: string, now = Date.now()): Promise<CompiledPlan | null> {
    const hit = this.cache.get(appId);
    if (hit !== undefined) {
      if (now - hit.at < PLAN_CACHE_TTL_MS) return hit.plan;
      if (hit.version !== null) {
        // The TTL is only the fallback for a missed notification: check the stored version, and
        // keep the compiled plan (and the optimised code V8 made of it) while it is unchanged.
        hit.at = now;
        this.recheck(appId, hit);
        return hit.plan;
      }
    }
    const entry: CacheEntry = { at: now, plan: Promise.resolve(null), version: null };
    entry.plan = this.load(appId, entry);
    this.cache.set(appId, entry);
    // A failed load is not cached: the next request tries again.
    entry.plan.catch(() => {
      if (this.cache.get(appId) === entry) this.cache.delete(appId);
    });
    return entry.plan;
  }

  /** Drops `entry` when the stored version is no longer the one it was compiled from. */
  private recheck(appId: string, entry: CacheEntry): void {
    this.plans
      .currentVersion(appId)
      .then((version) => {
        if (version !== entry.version && this.cache.get(appId) === entry) this.cache.delete(appId);
      })
      .catch(() => {
        if (this.cache.get(appId) === entry) this.cache.delete(appId);
      });
  }

  /**
   * The app's current plan, read from the database rather than trusted from the cache: the
   * replay's plan. The compiled copy is reused when it is of the current version.
   */
  async current(appId: string): Promise<CompiledPlan | null> {
    const row = await this.plans.current(appId);
    const cached = await this.active(appId).catch(() => null);
    if (cached === null ? !row || row.plan.mode === 'off' : cached.version === row?.version) return cached;
    this.forget(appId);
    return this.active(appId);
  }

  private async load(appId: string, entry: CacheEntry): Promise<CompiledPlan | null> {
    const row = await this.plans.current(appId);
    entry.version = row?.version ?? 0;
    if (!row || row.plan.mode === 'off') return null;
    let compiled: PlanCompilation;
    try {
      compiled = await compilePlanOffThread(row.plan, row.version, 'stored');
    } catch (err) {
      // The compiler itself failed, or the machine was too busy to run it in time: no batch fails
      // for it; the plan is tried again later.
      const busy = err instanceof AppError && err.code === 'service_unavailable';
      this.logger[busy ? 'warn' : 'error'](
        `Plan ${row.version} of app ${appId} could not be compiled (${(err as Error).message}); ` +
          `not applied for now, tried again in ${COMPILE_RETRY_MS / 1000} s.`,
      );
      this.retryLater(appId, entry);
      return null;
    }
    if (!compiled.ok) {
      // Stored by an older version, before a bound it breaks: not applied, rather than failing
      // every batch of the app; the next valid version applies as usual (docs/decisions.md).
      this.reportNotApplied(appId, row.version, compiled.problems);
      // Past the compile's deadline on a busy machine is no verdict on the plan: try again later.
      if (compiled.problems.some(isCompileCost)) this.retryLater(appId, entry);
      return null;
    }
    compiled.compiled.onFailure = (eventName, err) =>
      this.logger.error(
        `The validator of ${JSON.stringify(eventName)} in plan ${row.version} of app ${appId} threw; ` +
          `its events are not checked against their schema: ${(err as Error).message}`,
      );
    return compiled.compiled;
  }

  /** Drops `entry` after COMPILE_RETRY_MS, so that a later request compiles the plan again. */
  private retryLater(appId: string, entry: CacheEntry): void {
    setTimeout(() => {
      if (this.cache.get(appId) === entry) this.cache.delete(appId);
    }, COMPILE_RETRY_MS).unref();
  }

  private reportNotApplied(appId: string, version: number, problems: PlanProblem[]): void {
    if (this.reported.get(appId) === version) return;
    this.reported.set(appId, version);
    const first = problems[0];
    const next = problems.some(isCompileCost)
      ? `tried again in ${COMPILE_RETRY_MS / 1000} s`
      : 'store a corrected version';
    this.logger.warn(
      `Plan ${version} of app ${appId} is not applied: it does not pass the plan checks ` +
        `(${problems.length} problem(s), first: ${first.path || 'plan'}: ${first.message}); ${next}.`,
    );
  }

  forget(appId: string): void {
    this.cache.delete(appId);
  }

  forgetAll(): void {
    this.cache.clear();
  }
}
