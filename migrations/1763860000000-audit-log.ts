import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The audit log of admin actions. Append-only in the database itself: a trigger refuses every
 * UPDATE, DELETE and TRUNCATE, whatever role or code path tries, so no bug and no hand-written
 * statement can rewrite history. Rows are small and few (one per admin action), so the table is
 * not partitioned and its key is its own sequence.
 */
export class AuditLog1763860000000 implements MigrationInterface {
  name = 'AuditLog1763860000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE audit_log (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        at timestamptz NOT NULL DEFAULT clock_timestamp(),
        actor_type text NOT NULL CHECK (actor_type IN ('api_key', 'cli')),
        actor_id text NOT NULL,
        action text NOT NULL,
        app_id uuid,
        target_id text,
        details jsonb NOT NULL DEFAULT '{}'::jsonb
      )`);
    await q.query(`CREATE INDEX audit_log_app ON audit_log (app_id, id)`);
    await q.query(`CREATE INDEX audit_log_at ON audit_log (at)`);
    await q.query(`
      CREATE FUNCTION audit_log_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP
          USING ERRCODE = 'insufficient_privilege';
      END $$`);
    await q.query(`
      CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
        FOR EACH ROW EXECUTE FUNCTION audit_log_refuse_change()`);
    await q.query(`
      CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
        FOR EACH STATEMENT EXECUTE FUNCTION audit_log_refuse_change()`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS audit_log`);
    await q.query(`DROP FUNCTION IF EXISTS audit_log_refuse_change()`);
  }
}
