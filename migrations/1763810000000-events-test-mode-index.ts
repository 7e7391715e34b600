import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The `testMode=true` filter of the events list. Test events are a small share of an app's
 * traffic, so without an index of their own the list walks the newest-first index past every
 * live event of the range to find a page of test ones. This index holds test events only: live
 * ingest never writes to it, so it costs the hot path nothing.
 *
 * Created on the partitioned table, so every day partition gets one; the build reads each
 * partition once and holds writes back while it runs (seconds per million events).
 */
export class EventsTestModeIndex1763810000000 implements MigrationInterface {
  name = 'EventsTestModeIndex1763810000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE INDEX events_app_test_received ON events (app_id, received_at DESC, id DESC)
        WHERE is_test_mode`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS events_app_test_received`);
  }
}
