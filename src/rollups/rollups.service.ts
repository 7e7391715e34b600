import { BeforeApplicationShutdown, Inject, Injectable, Logger } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import { AppError } from '@app/common/app-error';
import { DAY_MS, utcDateString } from '@app/common/time';
import { normaliseAppId, UUID } from '@app/common/ids';
import { APP_CONFIG, AppConfig } from '@app/config/config';
import { invalidQuery } from '@app/common/query-validation.pipe';
import { addDays, daySpan, parseUtcDate } from '@app/common/reads/time-params';
import { AppDay, RollupComputationRepository } from './rollup-computation.repository';
import { RollupRepository, RollupRow } from './rollup.repository';
import type { ListRollupsQueryDto } from './list-rollups-query.dto';
import type { RollupRecordDto } from './rollup-record.dto';

export interface ComputeOptions {
  appId?: string;
  /** First UTC day, YYYY-MM-DD. */
  from?: string;
  /** Last UTC day, YYYY-MM-DD. */
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

export const DEFAULT_RANGE_DAYS = 30;
export const MAX_SPAN_DAYS = 366;

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
    // Final once computed after the day ended (UTC): no later event can change it.
    final: row.computedMs >= parseUtcDate(row.day)! + DAY_MS,
    computedAt: row.computedMs,
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
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** GET /api/v1/rollups. */
  async list(query: ListRollupsQueryDto, now = Date.now()): Promise<RollupRecordDto[]> {
    const today = utcDateString(now);
    if (query.range !== undefined && (query.fromDate !== undefined || query.toDate !== undefined)) {
      const field = query.fromDate !== undefined ? 'fromDate' : 'toDate';
      throw invalidQuery([
        { field: 'range', code: 'conflict', message: `range cannot be combined with ${field}` },
      ]);
    }
    let fromDate: string;
    let toDate: string;
    if (query.range !== undefined) {
      const days = Number(query.range.slice(0, -1));
      if (days > MAX_SPAN_DAYS) {
        throw invalidQuery([
          { field: 'range', code: 'out_of_range', message: `range must be 1d to ${MAX_SPAN_DAYS}d` },
        ]);
      }
      toDate = today;
      fromDate = addDays(today, -(days - 1));
    } else {
      toDate = query.toDate ?? today;
      fromDate = query.fromDate ?? addDays(toDate, -(DEFAULT_RANGE_DAYS - 1));
    }
    if (fromDate > toDate) {
      throw invalidQuery([
        { field: 'fromDate', code: 'invalid_range', message: 'fromDate must not be after toDate' },
      ]);
    }
    if (daySpan(fromDate, toDate) > MAX_SPAN_DAYS) {
      throw invalidQuery([
        {
          field: 'fromDate',
          code: 'span_too_long',
          message: `the range from fromDate to toDate spans more than ${MAX_SPAN_DAYS} days`,
        },
      ]);
    }
    const appId = normaliseAppId(query.appId);
    const rows = await this.rollups.list(appId, {
      fromDate,
      toDate,
      eventName: query.eventName,
      testMode: query.testMode ?? 'false',
    });
    return rows.map((row) => toRecord(appId, row));
  }

  /**
   * The scheduled computation: every (app, day) marked dirty by ingest, plus every ended day
   * whose rows were computed before its end (finalisation after midnight UTC). Skips when
   * another instance holds the lock, or when a run is already in flight here.
   */
  run(now = Date.now()): Promise<RunResult> {
    if (this.running) return Promise.resolve({ status: 'skipped', days: 0, rows: 0 });
    this.running = this.computation
      .withComputationLock(async (runner): Promise<RunResult> => {
        const lagSeconds = await this.computation.pendingLagSeconds(runner);
        const dirty = await this.computation.dirtyDays(runner);
        // Older days have lost their events to retention: recomputing them would change nothing.
        const today = utcDateString(now);
        const since = addDays(today, -this.config.eventRetentionDays);
        const unfinal = await this.computation.unfinalisedDays(runner, since, today);
        return { ...(await this.recompute(runner, dedupe([...dirty, ...unfinal]))), lagSeconds };
      })
      .then((result): RunResult => (result.locked ? result.value : { status: 'skipped', days: 0, rows: 0 }))
      .finally(() => {
        this.running = null;
      });
    return this.running;
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
        days = await this.computation.daysWithEvents(runner, { appId, from: options.from, to: options.to });
      }
      return this.recompute(runner, days);
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
    days: string[],
    lockWaitMs = COMPUTE_LOCK_WAIT_MS,
  ): Promise<{ days: number; rows: number }> {
    const result = await this.computation.withComputationLock(async (runner) => {
      let rows = 0;
      for (const day of days)
        rows += await this.computation.recomputeDay(runner, appId, day, { prune: true });
      return { days: days.length, rows };
    }, lockWaitMs);
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

  private async recompute(runner: QueryRunner, days: AppDay[]): Promise<RunResult> {
    let rows = 0;
    let done = 0;
    for (const { appId, day } of days) {
      if (this.stopping) break;
      rows += await this.computation.recomputeDay(runner, appId, day);
      done++;
    }
    if (done) this.logger.log(`recomputed ${done} app-days, ${rows} rollup rows`);
    return { status: 'computed', days: done, rows, abandoned: done < days.length };
  }
}

function dedupe(days: AppDay[]): AppDay[] {
  const seen = new Set<string>();
  return days.filter((d) => {
    const key = `${d.appId} ${d.day}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
