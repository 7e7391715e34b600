import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Apps can be deleted with all their data (`tally apps delete`). The app is marked at once
 * (`deleting_since`: hidden from lists, no new keys), and a deletion of kind `app` erases its
 * rows, table by table, through the same resumable job as a user erasure. That record outlives
 * the app, so `deletions.app_id` no longer references `apps`.
 */
export class AppDeletion1763930000000 implements MigrationInterface {
  name = 'AppDeletion1763930000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE apps ADD COLUMN deleting_since timestamptz`);
    await q.query(
      `ALTER TABLE deletions ADD COLUMN kind text NOT NULL DEFAULT 'users' CHECK (kind IN ('users', 'app'))`,
    );
    await q.query(`ALTER TABLE deletions DROP CONSTRAINT IF EXISTS deletions_app_id_fkey`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DELETE FROM deletions WHERE kind = 'app'`);
    await q.query(`ALTER TABLE deletions DROP COLUMN kind`);
    await q.query(`ALTER TABLE deletions ADD FOREIGN KEY (app_id) REFERENCES apps (id)`);
    await q.query(`ALTER TABLE apps DROP COLUMN deleting_since`);
  }
}
