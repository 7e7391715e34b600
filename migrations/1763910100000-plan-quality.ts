import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Daily counts of what tracking plans did at ingest, for the dashboard's "Data quality" view
 * (`GET /api/v1/plan/quality`): per app, UTC day and event name, the events the plan accepted
 * (`flagged` of them with warnings) and rejected, and per rule how often it was broken. Each
 * instance adds its counts every few seconds in one statement.
 */
export class PlanQuality1763910100000 implements MigrationInterface {
  name = 'PlanQuality1763910100000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE plan_quality_daily (
        app_id      uuid NOT NULL,
        day         date NOT NULL,
        event_name  text COLLATE "C" NOT NULL,
        accepted    bigint NOT NULL DEFAULT 0,
        flagged     bigint NOT NULL DEFAULT 0,
        rejected    bigint NOT NULL DEFAULT 0,
        PRIMARY KEY (app_id, day, event_name)
      )`);
    await q.query(`
      CREATE TABLE plan_rule_daily (
        app_id      uuid NOT NULL,
        day         date NOT NULL,
        event_name  text COLLATE "C" NOT NULL,
        field       text NOT NULL,
        rule        text NOT NULL,
        violations  bigint NOT NULL DEFAULT 0,
        PRIMARY KEY (app_id, day, event_name, field, rule)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS plan_rule_daily`);
    await q.query(`DROP TABLE IF EXISTS plan_quality_daily`);
  }
}
