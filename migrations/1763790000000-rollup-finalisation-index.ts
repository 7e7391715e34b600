import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The rollup task looks every run for days that have ended but were last computed before their
 * end. This partial index holds only such rows (today's, and any ended day not yet finalised),
 * so the lookup stays small however many days of rollups are kept.
 */
export class RollupFinalisationIndex1763790000000 implements MigrationInterface {
  name = 'RollupFinalisationIndex1763790000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE INDEX rollups_unfinal ON rollups (day, app_id)
        WHERE computed_at < ((day + 1)::timestamp AT TIME ZONE 'UTC')`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS rollups_unfinal`);
  }
}
