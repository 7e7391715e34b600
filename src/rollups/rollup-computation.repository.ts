import { Injectable, Optional } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, QueryRunner } from 'typeorm';
import { ADVISORY_LOCKS } from '@app/database/advisory-locks';
import { sqlState } from '@app/database/transient-error';
import { RollupSteps, type LocalDayTarget } from './rollup-steps';
import { EVENT_COLUMN as c } from '@app/common/events/event-fields';
import { saturatedDouble } from './saturated-sum';

export type { LocalDayTarget } from './rollup-steps';

export const ROLLUP_LOCK_ID = ADVISORY_LOCKS.rollups;
// SQLSTATE of a lock wait that ran past lock_timeout.
const LOCK_NOT_AVAILABLE = '55P03';

// One day of a large app can take longer than the request statement timeout.
const RECOMPUTE_STATEMENT_TIMEOUT = '15min';

export interface AppDay {
  appId: string;
  /** Local day in `zone`, `YYYY-MM-DD`. */
  day: string;
  /** The IANA zone that names `day` (dirty marks and stored rows carry theirs). */
  zone?: string;
}

/**
 * The writes of the rollup computation. Everything runs on one dedicated connection that holds
 * a session-level advisory lock, so only one instance computes at a time; if the process dies,
 * the connection closes and PostgreSQL releases the lock.
 */
@Injectable()
export class RollupComputationRepository {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @Optional() private readonly steps: RollupSteps = new RollupSteps(),
  ) {}

  /**
   * Runs `work` on a connection that holds the computation lock, then lets the lock go. Without
   * `waitMs`, gives up at once when another session holds the lock; with it, blocks on the lock
   * for at most that long (PostgreSQL's lock_timeout). Returns `{ locked: false }` when it gave up.
   */
  async withComputationLock<T>(
    work: (runner: QueryRunner) => Promise<T>,
    waitMs?: number,
  ): Promise<{ locked: true; value: T } | { locked: false }> {
    const runner = this.db.createQueryRunner();
    try {
      await runner.connect();
      if (!(await this.lock(runner, waitMs))) return { locked: false };
      const unlock = () => runner.query('SELECT pg_advisory_unlock($1)', [ROLLUP_LOCK_ID]);
      let value: T;
      try {
        value = await work(runner);
      } catch (err) {
        // The work's error is the one to report: a lost connection has released the lock anyway.
        await unlock().catch(() => undefined);
        throw err;
      }
      await unlock();
      return { locked: true, value };
    } finally {
      await runner.release();
    }
  }

  private async lock(runner: QueryRunner, waitMs: number | undefined): Promise<boolean> {
    if (!waitMs) {
      const [row] = (await runner.query('SELECT pg_try_advisory_lock($1) AS locked', [ROLLUP_LOCK_ID])) as {
        locked: boolean;
      }[];
      return row.locked;
    }
    // Session settings, reset below: the connection goes back to the pool afterwards. The
    // statement timeout must outlast the lock wait, or it would fire first.
    await runner.query(
      `SELECT set_config('lock_timeout', $1, false), set_config('statement_timeout', $2, false)`,
      [`${waitMs}ms`, `${waitMs + 10_000}ms`],
    );
    try {
      await runner.query('SELECT pg_advisory_lock($1)', [ROLLUP_LOCK_ID]);
      return true;
    } catch (err) {
      if (sqlState(err) === LOCK_NOT_AVAILABLE) return false;
      throw err;
    } finally {
      await runner.query('RESET lock_timeout; RESET statement_timeout');
    }
  }

  /** Removes erased users from every registered step's data, under the lock `runner` holds. */
  async forgetUsers(runner: QueryRunner, appId: string, userIds: string[]): Promise<void> {
    for (const step of this.steps.list()) await step.forgetUsers(runner, appId, userIds);
  }

  /** Runs every registered step's upkeep after a computation's days, under the lock `runner` holds. */
  async afterDays(runner: QueryRunner): Promise<void> {
    for (const step of this.steps.list()) await step.afterDays?.(runner);
  }

  /** Seconds since the oldest mark still waiting for a recomputation; 0 when none waits. */
  async pendingLagSeconds(runner: QueryRunner): Promise<number> {
    const [row] = (await runner.query(
      `SELECT coalesce(extract(epoch FROM now() - min(marked_at)), 0)::float8 AS lag FROM rollup_dirty`,
    )) as { lag: number }[];
    return Math.max(0, row.lag);
  }

  /** Every (app, local day, zone) that ingest marked since its last recomputation. */
  async dirtyDays(runner: QueryRunner): Promise<Required<AppDay>[]> {
    return (await runner.query(
      `SELECT DISTINCT app_id AS "appId", day::text AS day, timezone AS zone
         FROM rollup_dirty ORDER BY day, "appId", zone`,
    )) as Required<AppDay>[];
  }

  /**
   * Days that have ended by `now` in their zone but whose rows were last computed before that
   * end (so they are not final yet), from `since` on. The partial index rollups_unfinal keeps
   * this cheap: it holds only such rows.
   */
  async unfinalisedDays(runner: QueryRunner, since: string, now: number): Promise<Required<AppDay>[]> {
    return (await runner.query(
      `SELECT DISTINCT app_id AS "appId", day::text AS day, timezone AS zone
         FROM rollups
        WHERE computed_at < coalesce(day_end, (day + 1)::timestamp AT TIME ZONE 'UTC')
          AND coalesce(day_end, (day + 1)::timestamp AT TIME ZONE 'UTC') <= $2
          AND day >= $1::date
        ORDER BY day, "appId"`,
      [since, new Date(now)],
    )) as Required<AppDay>[];
  }

  /**
   * The (app, UTC day) pairs that have stored events, optionally for one app and a range of UTC
   * days; the caller maps them to the app's local days.
   */
  async utcDaysWithEvents(
    runner: QueryRunner,
    scope: { appId?: string; from?: string; to?: string },
  ): Promise<AppDay[]> {
    const params: unknown[] = [];
    const where: string[] = [];
    if (scope.appId !== undefined) {
      params.push(scope.appId);
      where.push(`${c.appId} = $${params.length}`);
    }
    if (scope.from !== undefined) {
      params.push(scope.from);
      where.push(`${c.timestamp} >= ($${params.length}::date::timestamp AT TIME ZONE 'UTC')`);
    }
    if (scope.to !== undefined) {
      params.push(scope.to);
      where.push(`${c.timestamp} < (($${params.length}::date + 1)::timestamp AT TIME ZONE 'UTC')`);
    }
    return (await runner.query(
      `SELECT DISTINCT ${c.appId} AS "appId", (${c.timestamp} AT TIME ZONE 'UTC')::date::text AS day
         FROM events
        ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
        ORDER BY day, "appId"`,
      params,
    )) as AppDay[];
  }

  /**
   * Recomputes local days of one app in one transaction: consume the dirty marks `consume`
   * names (if any), then aggregate each day's events with one set-based statement and upsert
   * every row. A crash before the commit leaves the marks in place, and a rerun writes the same
   * numbers, so nothing is counted twice. Marks committed after the DELETE survive for the next
   * run. A day of the new set of a zone change also moves that change's progress past it, in
   * the same transaction, so that a restart resumes after the last day done. Returns the rows
   * written.
   *
   * A day whose partition is gone has no events and writes nothing: its rollups stay as they were.
   *
   * At most `maxNames` event names get rows (those with the most events across both modes, ties
   * by name); the total rows still count every event. Rows of the day that this computation did
   * not write (a name that fell out of the top) are deleted, so a day never holds more. With
   * `prune` (after an erasure removed events of a day whose partition exists), that holds even
   * when the day has no events left.
   */
  async recomputeDays(
    runner: QueryRunner,
    appId: string,
    days: LocalDayTarget[],
    maxNames: number,
    options: { consume?: { day: string; zone: string }; prune?: boolean } = {},
  ): Promise<number> {
    await runner.startTransaction('READ COMMITTED');
    try {
      await runner.query(`SET LOCAL statement_timeout = '${RECOMPUTE_STATEMENT_TIMEOUT}'`);
      const { consume, prune = false } = options;
      if (consume) {
        await runner.query(
          `DELETE FROM rollup_dirty WHERE app_id = $1 AND day = $2::date AND timezone = $3`,
          [appId, consume.day, consume.zone],
        );
      }
      let rows = 0;
      for (const target of days) rows += await this.computeDay(runner, appId, target, maxNames, prune);
      await runner.commitTransaction();
      return rows;
    } catch (err) {
      await runner.rollbackTransaction().catch(() => undefined);
      throw err;
    }
  }

  private async computeDay(
    runner: QueryRunner,
    appId: string,
    target: LocalDayTarget,
    maxNames: number,
    prune: boolean,
  ): Promise<number> {
    const table = target.set === 'served' ? 'rollups' : 'rollups_rezone';
    // The sum runs in numeric so that it is exact and independent of row order; float8
    // addition would make a recomputation differ in the last bits. Finite values can still add
    // up past the float8 range (two events near 1.8e308), which would fail the whole day, so
    // the stored sum saturates at the largest finite double instead.
    const result = await runner.query(
      `INSERT INTO ${table} AS r (app_id, day, is_test_mode, event_name, events, unique_users,
                                 unique_sessions, fv_count, fv_sum, fv_min, fv_max, computed_at, timezone,
                                 day_end)
       SELECT $1::uuid, $2::date, is_test_mode, name, events, unique_users, unique_sessions,
              fv_count, fv_sum, fv_min, fv_max, now(), $3::text, $5::timestamptz
         FROM (SELECT g.*, dense_rank() OVER (PARTITION BY name = '' ORDER BY name_events DESC, name) AS name_rank
                 FROM (
       SELECT ${c.isTestMode} AS is_test_mode,
              CASE WHEN GROUPING(${c.eventName}) = 1 THEN '' ELSE ${c.eventName} END AS name,
              count(*) AS events, count(DISTINCT ${c.anonymousUserId}) AS unique_users,
              count(DISTINCT ${c.sessionId}) AS unique_sessions, count(${c.floatValue}) AS fv_count,
              ${saturatedDouble(`sum(${c.floatValue}::numeric)`)} AS fv_sum,
              min(${c.floatValue}) AS fv_min, max(${c.floatValue}) AS fv_max,
              sum(count(*)) OVER (PARTITION BY GROUPING(${c.eventName}), ${c.eventName}) AS name_events
         FROM events
        WHERE ${c.appId} = $1::uuid
          AND ${c.timestamp} >= $4::timestamptz
          AND ${c.timestamp} < $5::timestamptz
        GROUP BY GROUPING SETS ((${c.isTestMode}, ${c.eventName}), (${c.isTestMode}))
                 ) g) ranked
        WHERE name = '' OR name_rank <= $6
       ON CONFLICT (app_id, day, is_test_mode, event_name) DO UPDATE
          SET events = EXCLUDED.events,
              unique_users = EXCLUDED.unique_users,
              unique_sessions = EXCLUDED.unique_sessions,
              fv_count = EXCLUDED.fv_count,
              fv_sum = EXCLUDED.fv_sum,
              fv_min = EXCLUDED.fv_min,
              fv_max = EXCLUDED.fv_max,
              computed_at = EXCLUDED.computed_at,
              timezone = EXCLUDED.timezone,
              day_end = EXCLUDED.day_end`,
      [appId, target.day, target.zone, new Date(target.start), new Date(target.end), maxNames],
      true,
    );
    const written = (result as { affected?: number }).affected ?? 0;
    if (written > 0 || prune) {
      // Rows this computation did not write (a name that fell out of the top, or one whose events
      // are gone) leave the day; now() is the transaction's start, so the rows above stay. A day
      // with no events at all keeps its rows unless told to prune: its partition may be gone.
      await runner.query(
        `DELETE FROM ${table} WHERE app_id = $1 AND day = $2::date AND computed_at < now()`,
        [appId, target.day],
      );
    }
    // Data derived day by day (insights) follows in the same transaction.
    for (const step of this.steps.list()) await step.computeDay(runner, appId, target, written > 0 || prune);
    if (target.set === 'rezone') {
      await runner.query(
        `UPDATE rollup_rezone_jobs SET next_day = greatest(next_day, $3::date + 1)
          WHERE app_id = $1 AND timezone = $2`,
        [appId, target.zone, target.day],
      );
    }
    return written;
  }
}
