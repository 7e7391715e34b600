import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Insights: exact distinct users over any range, and breakdowns by dimension.
 *
 * - `insight_ids` gives each user id (kind `u`) and session id (kind `s`) of an app a dense
 *   number, in the order the computation first met it. An id is kept only as `key`, a keyed hash
 *   with the app's secret (the first 16 bytes of SHA-256 of secret and id), never in clear.
 *   `insight_counters` holds the next number, which never goes back, so an erased user's number
 *   is never reused.
 * - `insight_day_users`: per (app, local day, mode, event name) the set of users as a bitmap over
 *   those numbers (`event_name = ''`: every event of the day).
 * - `insight_breakdowns`: per (app, local day, dimension, mode, value) the events, the float-value
 *   statistics and the users and sessions as bitmaps. `kind` 0 is a value, 1 the events without
 *   the field, 2 the values folded together past BREAKDOWN_MAX_VALUES.
 * - `rezone` marks the rows of a zone change's new set, built beside the served ones.
 * - `apps.dimensions`: the payload keys an app declared as breakdown dimensions.
 */
export class Insights1764000000000 implements MigrationInterface {
  name = 'Insights1764000000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE apps ADD COLUMN dimensions text[] NOT NULL DEFAULT '{}'`);
    await q.query(`
      CREATE TABLE insight_ids (
        app_id  uuid NOT NULL,
        kind    "char" NOT NULL,
        key     bytea NOT NULL,
        no      integer NOT NULL,
        PRIMARY KEY (app_id, kind, key)
      )`);
    await q.query(`
      CREATE TABLE insight_counters (
        app_id   uuid NOT NULL,
        kind     "char" NOT NULL,
        next_no  integer NOT NULL,
        PRIMARY KEY (app_id, kind)
      )`);
    await q.query(`
      CREATE TABLE insight_day_users (
        app_id        uuid NOT NULL,
        rezone        boolean NOT NULL,
        day           date NOT NULL,
        is_test_mode  boolean NOT NULL,
        event_name    text COLLATE "C" NOT NULL,
        users         bit varying NOT NULL,
        timezone      text NOT NULL,
        day_end       timestamptz NOT NULL,
        computed_at   timestamptz NOT NULL,
        PRIMARY KEY (app_id, rezone, event_name, day, is_test_mode)
      )`);
    await q.query(`
      CREATE TABLE insight_breakdowns (
        app_id        uuid NOT NULL,
        rezone        boolean NOT NULL,
        dimension     text COLLATE "C" NOT NULL,
        day           date NOT NULL,
        is_test_mode  boolean NOT NULL,
        kind          smallint NOT NULL,
        value         text COLLATE "C" NOT NULL,
        events        bigint NOT NULL,
        fv_count      bigint NOT NULL,
        fv_sum        double precision,
        fv_min        double precision,
        fv_max        double precision,
        users         bit varying NOT NULL,
        sessions      bit varying NOT NULL,
        timezone      text NOT NULL,
        day_end       timestamptz NOT NULL,
        computed_at   timestamptz NOT NULL,
        PRIMARY KEY (app_id, rezone, dimension, day, is_test_mode, kind, value)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS insight_breakdowns`);
    await q.query(`DROP TABLE IF EXISTS insight_day_users`);
    await q.query(`DROP TABLE IF EXISTS insight_counters`);
    await q.query(`DROP TABLE IF EXISTS insight_ids`);
    await q.query(`ALTER TABLE apps DROP COLUMN IF EXISTS dimensions`);
  }
}
