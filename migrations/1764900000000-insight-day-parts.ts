import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What lets a day that gained events take only those events (docs/decisions.md, "Days that
 * gained events"):
 *
 * - `insight_day_sources` keeps, beside the digest of the day's settings, the parts of the events
 *   its rows hold: their count, the sum of their ids, the sum of a 64-bit hash of each id, the
 *   largest id, and the event names the day's per-name user sets followed. Null on the rows
 *   written before: such a day is computed whole the next time it changes.
 * - A breakdown row's float-value sum is kept exact (`numeric`) rather than rounded to a double,
 *   so that adding the sum of new events to it gives what summing every event gives. A sum stored
 *   as a double keeps its value; reads already added the days' sums as `numeric`.
 */
export class InsightDayParts1764900000000 implements MigrationInterface {
  name = 'InsightDayParts1764900000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      ALTER TABLE insight_day_sources
        ADD COLUMN events   bigint,
        ADD COLUMN id_sum   numeric,
        ADD COLUMN hash_sum numeric,
        ADD COLUMN max_id   bigint,
        ADD COLUMN names    text[]`);
    await q.query(`ALTER TABLE insight_breakdowns ALTER COLUMN fv_sum TYPE numeric`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE insight_breakdowns ALTER COLUMN fv_sum TYPE double precision`);
    await q.query(`
      ALTER TABLE insight_day_sources
        DROP COLUMN events, DROP COLUMN id_sum, DROP COLUMN hash_sum, DROP COLUMN max_id, DROP COLUMN names`);
  }
}
