import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * App time zones. `apps.timezone` is the zone the app asked for; `apps.rollup_timezone` is the
 * zone its served rollups are computed in. The two differ while a zone change is recomputed:
 * the new set is built in `rollups_rezone` and swapped in at once when complete, and
 * `rollup_rezone_jobs` keeps the progress so that a restart resumes it. Every rollup row and
 * every dirty mark names the zone of its day.
 */
export class AppTimezones1763890000000 implements MigrationInterface {
  name = 'AppTimezones1763890000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE apps ADD COLUMN timezone text NOT NULL DEFAULT 'UTC'`);
    await q.query(`ALTER TABLE apps ADD COLUMN rollup_timezone text NOT NULL DEFAULT 'UTC'`);
    await q.query(`ALTER TABLE rollups ADD COLUMN timezone text NOT NULL DEFAULT 'UTC'`);
    // The instant the row's local day ends, computed by the service (Intl) with the row; null
    // (the rows before this migration) is the end of the UTC day.
    await q.query(`ALTER TABLE rollups ADD COLUMN day_end timestamptz`);
    await q.query(`ALTER TABLE rollup_dirty ADD COLUMN timezone text NOT NULL DEFAULT 'UTC'`);
    await q.query(`CREATE TABLE rollups_rezone (LIKE rollups INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`);
    await q.query(`ALTER TABLE rollups_rezone ADD PRIMARY KEY (app_id, day, is_test_mode, event_name)`);
    await q.query(`
      CREATE TABLE rollup_rezone_jobs (
        app_id        uuid PRIMARY KEY,
        timezone      text NOT NULL,
        from_day      date NOT NULL,
        next_day      date NOT NULL,
        requested_at  timestamptz NOT NULL DEFAULT now()
      )`);
    // A row is unfinished while it was computed before the end of its day in its own zone.
    await q.query(`DROP INDEX IF EXISTS rollups_unfinal`);
    await q.query(
      `CREATE INDEX rollups_unfinal ON rollups (day, app_id)
        WHERE computed_at < coalesce(day_end, (day + 1)::timestamp AT TIME ZONE 'UTC')`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS rollups_unfinal`);
    await q.query(
      `CREATE INDEX rollups_unfinal ON rollups (day, app_id)
        WHERE computed_at < ((day + 1)::timestamp AT TIME ZONE 'UTC')`,
    );
    await q.query(`DROP TABLE IF EXISTS rollup_rezone_jobs`);
    await q.query(`DROP TABLE IF EXISTS rollups_rezone`);
    await q.query(`ALTER TABLE rollup_dirty DROP COLUMN IF EXISTS timezone`);
    await q.query(`ALTER TABLE rollups DROP COLUMN IF EXISTS day_end`);
    await q.query(`ALTER TABLE rollups DROP COLUMN IF EXISTS timezone`);
    await q.query(`ALTER TABLE apps DROP COLUMN IF EXISTS rollup_timezone`);
    await q.query(`ALTER TABLE apps DROP COLUMN IF EXISTS timezone`);
  }
}
