import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Insight bitmaps as a band: `users_from` and `sessions_from` give the number that bit 0 of
 * `users` and `sessions` stands for (a multiple of 8), so that a set only spans the numbers
 * that occur in it rather than starting at number 0. Rows written before keep 0, which is what
 * they mean. The tables stay as distributed as they were (adding a column reaches the shards).
 */
export class InsightBitmapBands1764400000000 implements MigrationInterface {
  name = 'InsightBitmapBands1764400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE insight_day_users ADD COLUMN users_from integer NOT NULL DEFAULT 0`);
    await q.query(
      `ALTER TABLE insight_breakdowns ADD COLUMN users_from integer NOT NULL DEFAULT 0,
                                     ADD COLUMN sessions_from integer NOT NULL DEFAULT 0`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE insight_breakdowns DROP COLUMN sessions_from, DROP COLUMN users_from`);
    await q.query(`ALTER TABLE insight_day_users DROP COLUMN users_from`);
  }
}
