import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, QueryRunner } from 'typeorm';
import { ADVISORY_LOCKS } from '@app/database/advisory-locks';
import { sqlState } from '@app/database/transient-error';

export const ROLLUP_LOCK_ID = ADVISORY_LOCKS.rollups;
// SQLSTATE of a lock wait that ran past lock_timeout.
const LOCK_NOT_AVAILABLE = '55P03';

// The largest finite double, as a numeric literal.
const MAX_DOUBLE = '1.7976931348623157e308::numeric';

// One day of a large app can take longer than the request statement timeout.
const RECOMPUTE_STATEMENT_TIMEOUT = '15min';

export interface AppDay {
  appId: string;
  /** UTC day, `YYYY-MM-DD`. */
  day: string;
}

/**
 * The writes of the rollup computation. Everything runs on one dedicated connection that holds
 * a session-level advisory lock, so only one instance computes at a time; if the process dies,
 * the connection closes and PostgreSQL releases the lock.
 */
@Injectable()
export class RollupComputationRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

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

  /** Seconds since the oldest mark still waiting for a recomputation; 0 when none waits. */
  async pendingLagSeconds(runner: QueryRunner): Promise<number> {
    const [row] = (await runner.query(
      `SELECT coalesce(extract(epoch FROM now() - min(marked_at)), 0)::float8 AS lag FROM rollup_dirty`,
    )) as { lag: number }[];
    return Math.max(0, row.lag);
  }

  /** Every (app, day) that ingest marked since its last recomputation. */
  async dirtyDays(runner: QueryRunner): Promise<AppDay[]> {
    return (await runner.query(
      `SELECT DISTINCT app_id AS "appId", day::text AS day FROM rollup_dirty ORDER BY day, "appId"`,
    )) as AppDay[];
  }

  /**
   * Days that have ended but whose rows were last computed before the end (so they are not
   * final yet). The partial index rollups_unfinal keeps this cheap: it holds only such rows.
   */
  async unfinalisedDays(runner: QueryRunner, since: string, today: string): Promise<AppDay[]> {
    return (await runner.query(
      `SELECT DISTINCT app_id AS "appId", day::text AS day
         FROM rollups
        WHERE computed_at < ((day + 1)::timestamp AT TIME ZONE 'UTC')
          AND day >= $1::date AND day < $2::date
        ORDER BY day, "appId"`,
      [since, today],
    )) as AppDay[];
  }

  /** The (app, day) pairs that have stored events, optionally for one app and a day range. */
  async daysWithEvents(
    runner: QueryRunner,
    scope: { appId?: string; from?: string; to?: string },
  ): Promise<AppDay[]> {
    const params: unknown[] = [];
    const where: string[] = [];
    if (scope.appId !== undefined) {
      params.push(scope.appId);
      where.push(`app_id = $${params.length}`);
    }
    if (scope.from !== undefined) {
      params.push(scope.from);
      where.push(`ts >= ($${params.length}::date::timestamp AT TIME ZONE 'UTC')`);
    }
    if (scope.to !== undefined) {
      params.push(scope.to);
      where.push(`ts < (($${params.length}::date + 1)::timestamp AT TIME ZONE 'UTC')`);
    }
    return (await runner.query(
      `SELECT DISTINCT app_id AS "appId", (ts AT TIME ZONE 'UTC')::date::text AS day
         FROM events
        ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
        ORDER BY day, "appId"`,
      params,
    )) as AppDay[];
  }

  /**
   * Recomputes one app's day in one transaction: consume its dirty marks, then aggregate the
   * day's events with one set-based statement and upsert every row. A crash before the commit
   * leaves the marks in place, and a rerun writes the same numbers, so nothing is counted twice.
   * Marks committed after the DELETE survive for the next run. Returns the rows written.
   *
   * A day whose partition is gone has no events and writes nothing: its rollups stay as they were.
   * With `prune` (after an erasure removed events of a day whose partition exists), the rows the
   * aggregation no longer produces, names or modes left without events, are deleted.
   */
  async recomputeDay(
    runner: QueryRunner,
    appId: string,
    day: string,
    { prune = false }: { prune?: boolean } = {},
  ): Promise<number> {
    await runner.startTransaction('READ COMMITTED');
    try {
      await runner.query(`SET LOCAL statement_timeout = '${RECOMPUTE_STATEMENT_TIMEOUT}'`);
      await runner.query(`DELETE FROM rollup_dirty WHERE app_id = $1 AND day = $2::date`, [appId, day]);
      // The sum runs in numeric so that it is exact and independent of row order; float8
      // addition would make a recomputation differ in the last bits. Finite values can still add
      // up past the float8 range (two events near 1.8e308), which would fail the whole day, so
      // the stored sum saturates at the largest finite double instead.
      const result = await runner.query(
        `INSERT INTO rollups AS r (app_id, day, is_test_mode, event_name, events, unique_users,
                                   unique_sessions, fv_count, fv_sum, fv_min, fv_max, computed_at)
         SELECT $1::uuid, $2::date, is_test_mode,
                CASE WHEN GROUPING(event_name) = 1 THEN '' ELSE event_name END,
                count(*), count(DISTINCT anonymous_user_id), count(DISTINCT session_id),
                count(float_value),
                greatest(least(sum(float_value::numeric), ${MAX_DOUBLE}), -${MAX_DOUBLE})::double precision,
                min(float_value), max(float_value), now()
           FROM events
          WHERE app_id = $1::uuid
            AND ts >= ($2::date::timestamp AT TIME ZONE 'UTC')
            AND ts < (($2::date + 1)::timestamp AT TIME ZONE 'UTC')
          GROUP BY GROUPING SETS ((is_test_mode, event_name), (is_test_mode))
         ON CONFLICT (app_id, day, is_test_mode, event_name) DO UPDATE
            SET events = EXCLUDED.events,
                unique_users = EXCLUDED.unique_users,
                unique_sessions = EXCLUDED.unique_sessions,
                fv_count = EXCLUDED.fv_count,
                fv_sum = EXCLUDED.fv_sum,
                fv_min = EXCLUDED.fv_min,
                fv_max = EXCLUDED.fv_max,
                computed_at = EXCLUDED.computed_at`,
        [appId, day],
        true,
      );
      if (prune) {
        // The upsert stamped every row it wrote with now(), the transaction's start.
        await runner.query(
          `DELETE FROM rollups WHERE app_id = $1 AND day = $2::date AND computed_at < now()`,
          [appId, day],
        );
      }
      await runner.commitTransaction();
      return result.affected ?? 0;
    } catch (err) {
      await runner.rollbackTransaction().catch(() => undefined);
      throw err;
    }
  }
}
