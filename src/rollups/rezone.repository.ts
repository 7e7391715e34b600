import { Injectable, Optional } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { RollupSteps } from './rollup-steps';

/** An app's zones: the one its served rollups are in, and the one a pending change moves to. */
export interface AppZones {
  appId: string;
  /** The zone of the rollups reads answer with. */
  served: string;
  /** The pending zone change, if any: its zone and the local days [fromDay, nextDay) done so far. */
  job: { zone: string; fromDay: string; nextDay: string } | null;
}

interface ZoneRow {
  appId: string;
  served: string;
  jobZone: string | null;
  fromDay: string | null;
  nextDay: string | null;
}

const ZONES = `
SELECT a.id AS "appId", a.rollup_timezone AS served, j.timezone AS "jobZone",
       j.from_day::text AS "fromDay", j.next_day::text AS "nextDay"
  FROM apps a LEFT JOIN rollup_rezone_jobs j ON j.app_id = a.id`;

// The columns a rollup set carries, in both tables.
const SET_COLUMNS = `app_id, day, is_test_mode, event_name, events, unique_users, unique_sessions, fv_count,
  fv_sum, fv_min, fv_max, computed_at, timezone, day_end`;

function toZones(r: ZoneRow): AppZones {
  return {
    appId: r.appId,
    served: r.served,
    job: r.jobZone === null ? null : { zone: r.jobZone, fromDay: r.fromDay!, nextDay: r.nextDay! },
  };
}

/**
 * Zone changes of the rollups: the pending changes (rollup_rezone_jobs), the new set built
 * beside the served one (rollups_rezone), and the swap that makes it the served set at once.
 */
@Injectable()
export class RezoneRepository {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @Optional() private readonly steps: RollupSteps = new RollupSteps(),
  ) {}

  /** The zones of the apps among `appIds`. */
  async zonesOf(runner: QueryRunner, appIds: string[]): Promise<Map<string, AppZones>> {
    const rows = (await runner.query(`${ZONES} WHERE a.id = ANY($1::uuid[])`, [appIds])) as ZoneRow[];
    return new Map(rows.map((r) => [r.appId, toZones(r)]));
  }

  /** Every app with a pending zone change, oldest request first. */
  async pending(runner: QueryRunner): Promise<AppZones[]> {
    const rows = (await runner.query(
      `${ZONES} WHERE j.app_id IS NOT NULL ORDER BY j.requested_at`,
    )) as ZoneRow[];
    return rows.map(toZones);
  }

  /**
   * Sets an app's zone, in the caller's transaction. When the served rollups are already in
   * that zone, any pending change is dropped; otherwise a change is (re)started from `fromDay`.
   * Returns the previous zone and whether a change now runs, or null when there is no such app.
   */
  async setZone(
    tx: EntityManager,
    appId: string,
    zone: string,
    fromDay: string,
  ): Promise<{ previous: string; recomputing: boolean } | null> {
    const rows = (await tx.query(
      `SELECT timezone, rollup_timezone AS served FROM apps WHERE id = $1 FOR UPDATE`,
      [appId],
    )) as { timezone: string; served: string }[];
    if (!rows.length) return null;
    await tx.query(`UPDATE apps SET timezone = $2 WHERE id = $1`, [appId, zone]);
    await tx.query(`DELETE FROM rollups_rezone WHERE app_id = $1`, [appId]);
    for (const step of this.steps.list()) await step.restartRezone(tx, appId);
    if (rows[0].served === zone) {
      await tx.query(`DELETE FROM rollup_rezone_jobs WHERE app_id = $1`, [appId]);
    } else {
      await tx.query(
        `INSERT INTO rollup_rezone_jobs (app_id, timezone, from_day, next_day) VALUES ($1, $2, $3, $3)
         ON CONFLICT (app_id) DO UPDATE
            SET timezone = EXCLUDED.timezone, from_day = EXCLUDED.from_day,
                next_day = EXCLUDED.next_day, requested_at = now()`,
        [appId, zone, fromDay],
      );
    }
    return { previous: rows[0].timezone, recomputing: rows[0].served !== zone };
  }

  /** Runs `work` in one transaction of the primary. */
  transaction<T>(work: (tx: EntityManager) => Promise<T>): Promise<T> {
    return this.db.transaction(work);
  }

  /**
   * Makes the complete new set the served one, in one transaction: the served rows of the
   * recomputed days [fromDay, …) go, the new rows replace them, and reads answer in the new zone
   * from the commit on. Older days keep their rows, which name the zone they were computed in.
   */
  async swap(runner: QueryRunner, appId: string, zone: string, fromDay: string): Promise<void> {
    await runner.startTransaction('READ COMMITTED');
    try {
      await runner.query(`DELETE FROM rollups WHERE app_id = $1 AND day >= $2::date`, [appId, fromDay]);
      await runner.query(
        `INSERT INTO rollups (${SET_COLUMNS}) SELECT ${SET_COLUMNS} FROM rollups_rezone
          WHERE app_id = $1 AND timezone = $2`,
        [appId, zone],
      );
      await runner.query(`DELETE FROM rollups_rezone WHERE app_id = $1`, [appId]);
      for (const step of this.steps.list()) await step.swap(runner, appId, fromDay);
      await runner.query(`UPDATE apps SET rollup_timezone = $2 WHERE id = $1`, [appId, zone]);
      await runner.query(`DELETE FROM rollup_rezone_jobs WHERE app_id = $1`, [appId]);
      await runner.commitTransaction();
    } catch (err) {
      await runner.rollbackTransaction().catch(() => undefined);
      throw err;
    }
  }
}
