import { MigrationInterface, QueryRunner } from 'typeorm';
import { hasCitus } from './citus';

/**
 * On Citus, the shards of `insight_breakdowns` keep their lists out of line without compression,
 * as the coordinator's table does since 1764500000000-breakdown-member-lists. Citus refuses
 * `SET STORAGE` on a distributed table, so each shard is altered by `run_command_on_shards`,
 * outside any transaction: inside one, the command would wait for the locks that transaction
 * holds on the shards. Setting a column's storage again is harmless, so a rerun changes nothing.
 * On a plain PostgreSQL it does nothing.
 */
export class CitusShardListStorage1764700000000 implements MigrationInterface {
  name = 'CitusShardListStorage1764700000000';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    if (!(await hasCitus(q))) return;
    await q.query(`SELECT run_command_on_shards('insight_breakdowns', $1)`, [
      `ALTER TABLE %s ALTER COLUMN users SET STORAGE EXTERNAL, ALTER COLUMN sessions SET STORAGE EXTERNAL`,
    ]);
  }

  async down(): Promise<void> {
    // The storage of a column is a tuning of how it is written; the migration before keeps it.
  }
}
