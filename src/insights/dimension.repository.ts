import { DataSource, EntityManager } from 'typeorm';
import { Injectable } from '@app/common/di';

/** The declared payload dimensions of an app (apps.dimensions) and the recomputation they need. */
@Injectable()
export class DimensionRepository {
  constructor(private readonly db: DataSource) {}

  transaction<T>(work: (tx: EntityManager) => Promise<T>): Promise<T> {
    return this.db.transaction(work);
  }

  /**
   * Sets the app's dimensions; returns the previous ones and the zone of its served days, or null
   * when there is no such app (or it is being deleted).
   */
  async setDimensions(
    tx: EntityManager,
    appId: string,
    keys: string[],
  ): Promise<{ previous: string[]; zone: string } | null> {
    const rows = (await tx.query(
      `SELECT dimensions, rollup_timezone AS zone FROM apps WHERE id = $1 AND deleting_since IS NULL FOR UPDATE`,
      [appId],
    )) as { dimensions: string[]; zone: string }[];
    if (!rows.length) return null;
    await tx.query(`UPDATE apps SET dimensions = $2::text[] WHERE id = $1`, [appId, keys]);
    return { previous: rows[0].dimensions, zone: rows[0].zone };
  }

  /**
   * Marks the local days [fromDay, toDay] of the app dirty, as ingest does, so that the rollup
   * computation recomputes them (and their breakdowns) on its next run.
   */
  async markDays(
    tx: EntityManager,
    appId: string,
    zone: string,
    fromDay: string,
    toDay: string,
  ): Promise<number> {
    const [, count] = (await tx.query(
      `INSERT INTO rollup_dirty (app_id, day, timezone)
       SELECT $1, d::date, $2 FROM generate_series($3::date, $4::date, interval '1 day') AS d`,
      [appId, zone, fromDay, toDay],
    )) as [unknown, number];
    return count;
  }
}
