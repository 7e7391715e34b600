import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The quarantine's per-day bound (QUARANTINE_MAX_EVENTS_PER_DAY): how many events each app has
 * had kept per UTC receive day. Ingest claims room in the row and inserts the events it got room
 * for in one transaction, so concurrent requests of one app never keep more than the bound.
 * `last_taken` hands the room one claim got back to it in the same statement.
 */
export class QuarantineBounds1763920000000 implements MigrationInterface {
  name = 'QuarantineBounds1763920000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE quarantine_days (
        app_id      uuid NOT NULL,
        day         date NOT NULL,
        kept        bigint NOT NULL,
        last_taken  integer NOT NULL,
        PRIMARY KEY (app_id, day)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS quarantine_days`);
  }
}
