import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Tracking plans and the quarantine (docs/ingest.md, "Tracking plans").
 *
 * `tracking_plans` keeps every version of an app's plan; the highest version is the one ingest
 * applies, and the older ones stay for the audit trail. A change notifies `tally_plan_changed`
 * (the app id) so that every instance drops its compiled copy.
 *
 * `quarantine` holds the events a plan rejected under `enforce`, as they would have been stored,
 * plus the rejection's code and violations. It is partitioned by UTC day of `received_at`; the
 * plans module creates the days ahead and drops those past QUARANTINE_DAYS. Its rows are never
 * read by events, rollups or export; a replay moves them into `events`, locking the rows it moves
 * (FOR UPDATE SKIP LOCKED) so that two concurrent replays never store the same row twice.
 */
export class TrackingPlans1763910000000 implements MigrationInterface {
  name = 'TrackingPlans1763910000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE tracking_plans (
        app_id      uuid NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
        version     integer NOT NULL CHECK (version > 0),
        plan        jsonb NOT NULL,
        created_at  timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (app_id, version)
      )`);
    await q.query(`CREATE SEQUENCE quarantine_id_seq AS bigint`);
    await q.query(`
      CREATE TABLE quarantine (
        app_id             uuid NOT NULL,
        received_at        timestamptz NOT NULL,
        id                 bigint NOT NULL DEFAULT nextval('quarantine_id_seq'),
        ts                 timestamptz NOT NULL,
        event_time         bigint,
        event_name         text COLLATE "C" NOT NULL,
        event_id           text,
        anonymous_user_id  text,
        session_id         text,
        is_test_mode       boolean NOT NULL,
        platform           text,
        app_version        text,
        build_number       text,
        os_version         text,
        device_model       text,
        locale             text,
        timezone           text,
        float_value        double precision,
        payload_json       json,
        code               text NOT NULL,
        violations         jsonb NOT NULL,
        PRIMARY KEY (app_id, received_at, id)
      ) PARTITION BY RANGE (received_at)`);
    await q.query(`ALTER SEQUENCE quarantine_id_seq OWNED BY quarantine.id`);
    await q.query(`CREATE INDEX quarantine_app_received ON quarantine (app_id, received_at DESC, id DESC)`);
    await q.query(`CREATE INDEX quarantine_app_user ON quarantine (app_id, anonymous_user_id)`);
    // Today and the next two days, so that ingest never misses a partition before the
    // maintenance task's first pass.
    for (let d = 0; d < 3; d++) {
      const day = new Date(Date.now() + d * 86_400_000).toISOString().slice(0, 10);
      const next = new Date(Date.parse(day) + 86_400_000).toISOString().slice(0, 10);
      await q.query(
        `CREATE TABLE IF NOT EXISTS quarantine_p${day.replace(/-/g, '')} PARTITION OF quarantine
           FOR VALUES FROM ('${day} 00:00:00+00') TO ('${next} 00:00:00+00')`,
      );
    }
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS quarantine`);
    await q.query(`DROP TABLE IF EXISTS tracking_plans`);
  }
}
