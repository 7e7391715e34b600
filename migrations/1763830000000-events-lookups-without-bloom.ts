import { MigrationInterface, QueryRunner } from 'typeorm';
import { EventsBloomExtension1763820000000 } from './1763820000000-events-bloom-extension';

/**
 * The sessionId and anonymousUserId lookups of the days ingest writes move from the `bloom`
 * extension's index to a BRIN index of bloom summaries, which is part of PostgreSQL (see
 * PartitionRepository and docs/performance.md). The extension is no longer used: dropping it
 * takes the current partitions' bloom indexes with it, and an instance builds their BRIN indexes
 * when it starts, without blocking writes.
 *
 * Where the extension was created by another role and this one may not drop it, the migration
 * leaves a notice and succeeds; the service drops the old indexes one by one instead.
 */
export class EventsLookupsWithoutBloom1763830000000 implements MigrationInterface {
  name = 'EventsLookupsWithoutBloom1763830000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      DO $$
      BEGIN
        DROP EXTENSION IF EXISTS bloom CASCADE;
      EXCEPTION WHEN insufficient_privilege THEN
        RAISE NOTICE 'bloom extension not dropped: %', SQLERRM;
      END $$`);
  }

  async down(q: QueryRunner): Promise<void> {
    // The extension as the migration before this one created it; the service of that version
    // builds the bloom indexes again.
    await new EventsBloomExtension1763820000000().up(q);
  }
}
