import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import type { TrackingPlan } from './plan.types';

/** Notified with the app id whenever a new plan version is stored (on commit). */
export const PLAN_CHANGED_CHANNEL = 'tally_plan_changed';

export interface PlanRow {
  version: number;
  plan: TrackingPlan;
  createdAt: number;
}

/** The versions of each app's tracking plan. The only code with SQL on `tracking_plans`. */
@Injectable()
export class PlansRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /** The app's current (highest) version, or null when it has none. */
  async current(appId: string): Promise<PlanRow | null> {
    const rows = (await this.db.query(
      `SELECT version, plan, (extract(epoch FROM created_at) * 1000)::bigint::text AS created_ms
         FROM tracking_plans WHERE app_id = $1 ORDER BY version DESC LIMIT 1`,
      [appId],
    )) as { version: number; plan: TrackingPlan; created_ms: string }[];
    if (!rows.length) return null;
    return { version: rows[0].version, plan: rows[0].plan, createdAt: Number(rows[0].created_ms) };
  }

  /** The app's current version number, 0 when it has none. */
  async currentVersion(appId: string): Promise<number> {
    const rows = (await this.db.query(
      `SELECT coalesce(max(version), 0) AS version FROM tracking_plans WHERE app_id = $1`,
      [appId],
    )) as { version: number }[];
    return rows[0].version;
  }

  /**
   * Stores `plan` (whose JSON text is `planJson`) as version `expected + 1` when the current
   * version is still `expected` (or, with `expected` null, whatever it is), and notifies every
   * instance on commit. Returns the new version, or null when another version was stored first.
   * `then` runs in the same transaction (the audit entry).
   */
  async insertNext(
    appId: string,
    expected: number | null,
    plan: TrackingPlan,
    planJson: string,
    then?: (manager: EntityManager, version: number) => Promise<void>,
  ): Promise<PlanRow | null> {
    return this.db.transaction(async (manager) => {
      // Serialises writers of one app: the second waits, then sees the first's version.
      await manager.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 7310100))`, [appId]);
      const [{ current }] = (await manager.query(
        `SELECT coalesce(max(version), 0) AS current FROM tracking_plans WHERE app_id = $1`,
        [appId],
      )) as { current: number }[];
      if (expected !== null && current !== expected) return null;
      const rows = (await manager.query(
        `INSERT INTO tracking_plans (app_id, version, plan) VALUES ($1, $2, $3::jsonb)
         RETURNING (extract(epoch FROM created_at - 'epoch'::timestamptz) * 1000)::bigint::text AS created_ms`,
        [appId, current + 1, planJson],
      )) as { created_ms: string }[];
      await manager.query(`SELECT pg_notify('${PLAN_CHANGED_CHANNEL}', $1)`, [appId]);
      await then?.(manager, current + 1);
      return { version: current + 1, plan, createdAt: Number(rows[0].created_ms) };
    });
  }
}
