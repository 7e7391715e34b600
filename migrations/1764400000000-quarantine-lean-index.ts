import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `quarantine_app_received` (app_id, received_at DESC, id DESC) repeated the primary key
 * (app_id, received_at, id), which PostgreSQL scans backwards for the same newest-first pages
 * and forwards for replays. Every kept event paid for both; now it pays for the key alone.
 */
export class QuarantineLeanIndex1764400000000 implements MigrationInterface {
  name = 'QuarantineLeanIndex1764400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS quarantine_app_received`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX quarantine_app_received ON quarantine (app_id, received_at DESC, id DESC)`);
  }
}
