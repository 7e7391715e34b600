import type { EntityManager } from 'typeorm';
import { BeforeApplicationShutdown, Inject, Injectable, Logger } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import { AppError } from '@app/common/app-error';
import { utcDateString } from '@app/common/time';
import { localDateString } from '@app/common/timezones';
import { normaliseAppId, UUID } from '@app/common/ids';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { resolveRange } from '@app/common/reads/day-range';
import { addDays } from '@app/common/reads/time-params';
import { AppDay, RollupComputationRepository } from './rollup-computation.repository';
import type { AuditActor } from '@app/audit/audit.types';
import { RecomputeItem, RezoneService, ZoneChange } from './rezone.service';
import { RollupFilters, RollupRepository, RollupRow } from './rollup.repository';
import { decodeRollupCursor, encodeRollupCursor } from './rollup-cursor';
import { CursorSecretRepository } from '@app/common/reads/cursor-secret.repository';
import { cursorPosition } from '@app/common/reads/signed-cursor';
import type { ListRollupsQueryDto } from './list-rollups-query.dto';
import type { RollupRecordDto } from './rollup-record.dto';

export interface ComputeOptions {
  appId?: string;
  /** First day, YYYY-MM-DD, in each app's zone. */
  from?: string;
  /** Last day, YYYY-MM-DD, in each app's zone. */
  to?: string;
  /** How long to wait for a computation running elsewhere to let go of the lock. */
  lockWaitMs?: number;
}

export interface RunResult {
  /** `skipped` when another instance (or run) holds the computation lock. */
  status: 'computed' | 'skipped';
  /** App-days recomputed. */
  days: number;
  /** Rollup rows written. */
  rows: number;
  /** Age in seconds of the oldest change the run picked up (scheduled runs only). */
  lagSeconds?: number;
  /** True when shutdown stopped the run before every pending day was done. */
  abandoned?: boolean;
}

/** One answer of GET /api/v1/rollups. */
export interface RollupsPage {
  rollups: RollupRecordDto[];
  /** Cursor of the next page, or null on the last one. */
  nextCursor: string | null;
}

// How long the CLI waits for a scheduled run on another instance to let go of the lock.
const COMPUTE_LOCK_WAIT_MS = 120_000;

function toRecord(appId: string, row: RollupRow): RollupRecordDto {
  const fvCount = row.fvCount;
  return {
    appId,
    date: row.day,
    eventName: row.eventName === '' ? null : row.eventName,
    isTestMode: row.isTestMode,
    events: row.events,
    uniqueUsers: row.uniqueUsers,
    uniqueSessions: row.uniqueSessions,
    floatValue:
      fvCount === 0
        ? null
        : {
            count: fvCount,
            sum: row.fvSum!,
            min: row.fvMin!,
            max: row.fvMax!,
            avg: row.fvSum! / fvCount,
          },
    // Final once computed after the day ended in its zone: no later event can change it.
    final: row.computedMs >= row.dayEndMs,
    computedAt: row.computedMs,
    timezone: row.timezone,
  };
}

@Injectable()
export class RollupsService implements BeforeApplicationShutdown {
  private readonly logger = new Logger(RollupsService.name);
  private running: Promise<RunResult> | null = null;
  private stopping = false;

  constructor(
    private readonly rollups: RollupRepository,
    private readonly computation: RollupComputationRepository,
    @Inject(APP_CONFIG)
    private readonly config: ConfigSlice<
      'eventRetentionDays' | 'ingestMaxEventNamesPerDay' | 'rollupsMaxRows'
    >,
    private readonly rezone: RezoneService,
    private readonly secrets: CursorSecretRepository,
  ) {}

  /**
   * GET /api/v1/rollups: one page of at most ROLLUPS_MAX_ROWS rows, and the cursor of the next
   * one. The cursor is bound to the query as sent (a `range` rather than the days it meant), so
   * a client paging across midnight keeps going instead of getting a 400.
   */
  async list(query: ListRollupsQueryDto, now = Date.now()): Promise<RollupsPage> {
    const appId = normaliseAppId(query.appId);
    // Days, "today" included, are the app's local days.
    const today = localDateString(now, await this.rollups.servedZone(appId));
    const { fromDate, toDate } = resolveRange(query, today);
    return this.page(appId, query, {
      fromDate,
      toDate,
      eventName: query.eventName,
      testMode: query.testMode ?? 'false',
    });
  }

  /** One page of the rows that `filters` select, strictly after the query's cursor. */
  private async page(
    appId: string,
    query: ListRollupsQueryDto,
    filters: RollupFilters,
  ): Promise<RollupsPage> {
    const binding = JSON.stringify([
      'rollups',
      appId,
      query.fromDate ?? null,
      query.toDate ?? null,
      query.range ?? null,
      query.eventName ?? null,
      filters.testMode,
    ]);
    const secret = await this.secrets.cursorSecret();
    const after = cursorPosition(query.cursor, (token) => decodeRollupCursor(secret, binding, token));
    const limit = this.config.rollupsMaxRows;
    const rows = await this.rollups.list(appId, filters, after, limit + 1);
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    const nextCursor =
      rows.length > limit
        ? encodeRollupCursor(secret, binding, {
            day: last.day,
            eventName: last.eventName,
            isTestMode: last.isTestMode,
          })
        : null;
    return { rollups: page.map((row) => toRecord(appId, row)), nextCursor };
  }

  /**
   * The scheduled computation: every (app, local day) marked dirty by ingest, plus every ended
   * day whose rows were computed before its end in their zone (finalisation after local
   * midnight), then a slice of the pending zone changes. Skips when another instance holds the
   * lock, or when a run is already in flight here. `rezoneBudgetMs` bounds the time spent on
   * zone changes (RezoneService's slice by default).
   */
  run(now = Date.now(), rezoneBudgetMs?: number): Promise<RunResult> {
    if (this.running) return Promise.resolve({ status: 'skipped', days: 0, rows: 0 });
    this.running = this.computation
      .withComputationLock(async (runner): Promise<RunResult> => {
        const lagSeconds = await this.computation.pendingLagSeconds(runner);
        const dirty = await this.computation.dirtyDays(runner);
        // Older days have lost their events to retention: recomputing them would change nothing.
        const since = addDays(utcDateString(now), -(this.config.eventRetentionDays + 1));
        const unfinal = await this.computation.unfinalisedDays(runner, since, now);
        const result = await this.recompute(runner, await this.rezone.plan(runner, dirty, unfinal));
        const rezoned = await this.rezone.step(runner, now, () => this.stopping, rezoneBudgetMs);
        return {
          ...result,
          days: result.days + rezoned.days,
          rows: result.rows + rezoned.rows,
          abandoned: result.abandoned || this.stopping,
          lagSeconds,
        };
      })
      .then((result): RunResult => (result.locked ? result.value : { status: 'skipped', days: 0, rows: 0 }))
      .finally(() => {
        this.running = null;
      });
    return this.running;
  }

  /** Sets an app's time zone; the retained days are then recomputed in it (see RezoneService). */
  setTimezone(appId: string, zone: string, actor: AuditActor): Promise<ZoneChange> {
    return this.rezone.setTimezone(appId, zone, actor);
  }

  /**
   * Recomputes on demand (the CLI): every day in [from, to] for one app, or every (app, day)
   * with stored events in the range. Without from/to, every day that has events. Waits for
   * the lock rather than skipping.
   */
  async compute(options: ComputeOptions): Promise<{ days: number; rows: number }> {
    const appId = options.appId === undefined ? undefined : normaliseAppId(options.appId);
    if (appId !== undefined && !UUID.test(appId)) {
      throw new AppError('invalid_query', `appId must be a UUID, got "${options.appId}"`);
    }
    const result = await this.computation.withComputationLock(async (runner) => {
      let days: AppDay[];
      if (appId !== undefined && options.from !== undefined && options.to !== undefined) {
        // Every day of the range, so that a day with events only in another mode still counts.
        days = [];
        for (let day = options.from; day <= options.to; day = addDays(day, 1)) days.push({ appId, day });
      } else {
        // A local day lies within a day either side of its UTC date.
        const utcDays = await this.computation.utcDaysWithEvents(runner, {
          appId,
          from: options.from === undefined ? undefined : addDays(options.from, -1),
          to: options.to === undefined ? undefined : addDays(options.to, 1),
        });
        days = await this.rezone.localDaysOf(runner, utcDays, options);
      }
      return this.recompute(runner, await this.rezone.plan(runner, [], days));
    }, options.lockWaitMs ?? COMPUTE_LOCK_WAIT_MS);
    if (!result.locked) {
      throw new AppError('service_unavailable', 'Another rollup computation is still running.');
    }
    return { days: result.value.days, rows: result.value.rows };
  }

  /**
   * Recomputes the days of one app from which events were removed (erasure), `final` days
   * included, and drops the rows left without events. `days` are the UTC days of the removed
   * events' `ts`. Waits for the computation lock; fails with `service_unavailable` if it never
   * comes, and a rerun is harmless.
   */
  async recomputeAfterRemoval(
    appId: string,
    utcDays: string[],
    lockWaitMs = COMPUTE_LOCK_WAIT_MS,
  ): Promise<{ days: number; rows: number }> {
    const result = await this.computation.withComputationLock(async (runner) => {
      // The removed events' UTC days, as the local days of the app's zone they overlap.
      const days = await this.rezone.localDaysOf(
        runner,
        utcDays.map((day) => ({ appId, day })),
        {},
      );
      // An erasure is on the clock (done within a minute): the steps' upkeep waits for the next run.
      return this.recompute(runner, await this.rezone.plan(runner, [], days), { prune: true, upkeep: false });
    }, lockWaitMs);
    if (!result.locked) {
      throw new AppError('service_unavailable', 'Another rollup computation is still running.');
    }
    return { days: result.value.days, rows: result.value.rows };
  }

  /**
   * Erasure: removes the users (stored ids) from the data the registered day steps keep for
   * every day, past event retention included (insights' user sets). Idempotent.
   */
  async forgetUsers(appId: string, userIds: string[], lockWaitMs = COMPUTE_LOCK_WAIT_MS): Promise<void> {
    const result = await this.computation.withComputationLock(
      (runner) => this.computation.forgetUsers(runner, appId, userIds),
      lockWaitMs,
    );
    if (!result.locked) {
      throw new AppError('service_unavailable', 'Another rollup computation is still running.');
    }
  }

  /**
   * Runs `work` while no rollup computation runs anywhere (it holds the computation lock), so
   * that no computation reads an app's marks or writes its rows meanwhile: an app's deletion.
   * `work` gets the connection that holds the lock. Fails with `service_unavailable` if the
   * lock never comes; a rerun is harmless.
   */
  async exclusive<T>(
    work: (manager: EntityManager) => Promise<T>,
    lockWaitMs = COMPUTE_LOCK_WAIT_MS,
  ): Promise<T> {
    const result = await this.computation.withComputationLock((runner) => work(runner.manager), lockWaitMs);
    if (!result.locked) {
      throw new AppError('service_unavailable', 'Another rollup computation is still running.');
    }
    return result.value;
  }

  /** Lets a running computation finish its current day, then stops it; later days stay marked. */
  async beforeApplicationShutdown(): Promise<void> {
    this.stopping = true;
    await this.running?.catch(() => undefined);
  }

  private async recompute(
    runner: QueryRunner,
    items: RecomputeItem[],
    options: { prune?: boolean; upkeep?: boolean } = {},
  ): Promise<RunResult> {
    let rows = 0;
    let done = 0;
    for (const { appId, targets, consume } of items) {
      if (this.stopping) break;
      rows += await this.computation.recomputeDays(
        runner,
        appId,
        targets,
        this.config.ingestMaxEventNamesPerDay,
        { consume, prune: options.prune },
      );
      done++;
    }
    if (done) this.logger.log(`recomputed ${done} app-days, ${rows} rollup rows`);
    if (done && options.upkeep !== false) {
      // Upkeep of what the steps keep; the days are committed whatever it does.
      await this.computation.afterDays(runner).catch((err: unknown) => {
        this.logger.warn(
          `upkeep after the computation failed: ${err instanceof Error ? err.message : String(err)}`,
        );
      });
    }
    return { status: 'computed', days: done, rows, abandoned: done < items.length };
  }
}
