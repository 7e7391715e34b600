import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The `bloom` index method, for the sessionId and anonymousUserId filters on the days that
 * ingest still writes (see PartitionRepository.indexLookups and docs/performance.md).
 *
 * `bloom` ships with PostgreSQL's contrib modules and is not a trusted extension, so creating it
 * takes a superuser. Where it is missing or the role may not create it, the migration leaves a
 * notice and succeeds: those filters then scan the current day, as they did before.
 */
export class EventsBloomExtension1763820000000 implements MigrationInterface {
  name = 'EventsBloomExtension1763820000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      DO $$
      BEGIN
        CREATE EXTENSION IF NOT EXISTS bloom;
      EXCEPTION WHEN feature_not_supported OR undefined_file OR insufficient_privilege THEN
        RAISE NOTICE 'bloom extension not created: %', SQLERRM;
      END $$`);
  }

  async down(q: QueryRunner): Promise<void> {
    // CASCADE: the per-partition bloom indexes go with it.
    await q.query(`DROP EXTENSION IF EXISTS bloom CASCADE`);
  }
}
