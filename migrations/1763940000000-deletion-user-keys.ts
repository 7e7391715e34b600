import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Erasure reaches copies outside Tally: each exported record carries `userKey`, a per-app
 * pseudonym of its user (an HMAC keyed with the new `user_key` server secret), and a finished
 * deletion keeps the `user_keys` of its users, so that a warehouse sync can delete the same
 * users without Tally ever repeating a raw id.
 */
export class DeletionUserKeys1763940000000 implements MigrationInterface {
  name = 'DeletionUserKeys1763940000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE deletions ADD COLUMN user_keys text[]`);
    await q.query(
      `CREATE INDEX deletions_app_finished ON deletions (app_id, finished_at) WHERE status = 'done'`,
    );
    await q.query(`
      INSERT INTO server_secrets (name, value)
      VALUES ('user_key', decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'))
      ON CONFLICT (name) DO NOTHING`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DELETE FROM server_secrets WHERE name = 'user_key'`);
    await q.query(`DROP INDEX IF EXISTS deletions_app_finished`);
    await q.query(`ALTER TABLE deletions DROP COLUMN user_keys`);
  }
}
