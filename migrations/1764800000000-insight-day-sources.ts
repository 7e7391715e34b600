import { MigrationInterface, QueryRunner } from 'typeorm';
import { distributeByApp, hasCitus, sequentialCitusTransaction } from './citus';

/**
 * What each computed insight day was computed from: per (app, set, local day) a digest of its
 * inputs (the day's events, its window, the declared dimensions, the value bound, the rollups'
 * event names). A recomputation that finds the same digest keeps the day's rows as they are
 * instead of reading and numbering its events again (docs/decisions.md, "Unchanged days").
 * `rezone` marks a zone change's new set, as in the other insight tables.
 */
export class InsightDaySources1764800000000 implements MigrationInterface {
  name = 'InsightDaySources1764800000000';

  async up(q: QueryRunner): Promise<void> {
    const citus = await hasCitus(q);
    if (citus) await sequentialCitusTransaction(q);
    await q.query(`
      CREATE TABLE insight_day_sources (
        app_id  uuid NOT NULL,
        rezone  boolean NOT NULL,
        day     date NOT NULL,
        source  bytea NOT NULL,
        PRIMARY KEY (app_id, rezone, day)
      )`);
    if (citus) await distributeByApp(q, ['insight_day_sources']);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS insight_day_sources`);
  }
}
