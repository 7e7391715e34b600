import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Event payloads are stored as `json`: the text the service wrote, checked by PostgreSQL and kept
 * as it is. Converting each payload to `jsonb` (parsing it into a tree, sorting its keys, turning
 * its numbers into `numeric`) was about 15 % of the database's work per ingested event, and
 * nothing reads inside a payload: it is stored and given back whole (docs/performance.md).
 *
 * A new column rather than a change of type: changing the type would rewrite every partition
 * under a lock that stops ingest, where adding a column without a default changes only the
 * catalog. Events stored before keep their payload in `payload`; reads take whichever is set.
 */
export class EventsPayloadJson1763840000000 implements MigrationInterface {
  name = 'EventsPayloadJson1763840000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE events ADD COLUMN payload_json json`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(
      `UPDATE events SET payload = payload_json::jsonb, payload_json = NULL WHERE payload_json IS NOT NULL`,
    );
    await q.query(`ALTER TABLE events DROP COLUMN payload_json`);
  }
}
