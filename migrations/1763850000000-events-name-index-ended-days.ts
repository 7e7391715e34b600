import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The eventName B-tree moves off the days that ingest writes. On the partitioned table it cost
 * every insert a descent and a leaf write, about a sixth of PostgreSQL's CPU per event
 * (docs/performance.md). The days ingest writes now answer the eventName filter from their BRIN
 * lookup index and the newest-first index, and each day that has ended gets the same B-tree
 * (`<partition>_name`) from the maintenance task, as it gets the user and session ones.
 *
 * Dropping the partitioned index drops every partition's copy at once and rebuilds nothing, so
 * the migration is quick. Until the maintenance task's hourly pass has built the ended days'
 * B-trees, without blocking writes, eventName reads of those days walk the newest-first index
 * instead.
 */
export class EventsNameIndexEndedDays1763850000000 implements MigrationInterface {
  name = 'EventsNameIndexEndedDays1763850000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS events_app_name_received`);
  }

  async down(q: QueryRunner): Promise<void> {
    // The ended days' own B-trees have this definition, so PostgreSQL attaches them instead of
    // building them again; the other partitions get theirs built.
    await q.query(
      `CREATE INDEX IF NOT EXISTS events_app_name_received ON events (app_id, event_name, received_at DESC, id DESC)`,
    );
  }
}
