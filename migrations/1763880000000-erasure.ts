import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Erasure of users' data (docs/security.md, "Privacy").
 *
 * `deletions` holds each request and the state of its job, so that any instance can resume it
 * after a crash. `user_ids` holds the ids (in their stored form) only while the job needs them:
 * the job sets it to NULL in the transaction that marks the deletion done.
 *
 * `requested_by` is the audit actor of the request (an API key id, or `cli` and the OS user); the
 * audit entry of the deletion's end names it too.
 *
 * `user_suppressions` holds the users whose events ingest refuses, as an HMAC of the app id and
 * the stored user id, keyed with the `suppression` server secret: ingest can match later events
 * without the table keeping the ids themselves.
 */
export class Erasure1763880000000 implements MigrationInterface {
  name = 'Erasure1763880000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE deletions (
        id               uuid PRIMARY KEY,
        app_id           uuid NOT NULL REFERENCES apps (id),
        status           text NOT NULL DEFAULT 'pending'
                         CHECK (status IN ('pending', 'running', 'done', 'failed')),
        user_count       integer NOT NULL,
        user_ids         text[],
        suppress         boolean NOT NULL,
        requested_by     jsonb NOT NULL,
        steps_done       text[] NOT NULL DEFAULT '{}',
        days             date[] NOT NULL DEFAULT '{}',
        events_deleted   bigint NOT NULL DEFAULT 0,
        days_recomputed  integer NOT NULL DEFAULT 0,
        attempts         integer NOT NULL DEFAULT 0,
        error            text,
        not_before       timestamptz NOT NULL,
        created_at       timestamptz NOT NULL DEFAULT now(),
        started_at       timestamptz,
        finished_at      timestamptz,
        CHECK (status IN ('done', 'failed') OR user_ids IS NOT NULL)
      )`);
    await q.query(`CREATE INDEX deletions_app_created ON deletions (app_id, created_at DESC, id DESC)`);
    await q.query(
      `CREATE INDEX deletions_unfinished ON deletions (not_before) WHERE status IN ('pending', 'running')`,
    );
    await q.query(`
      CREATE TABLE user_suppressions (
        app_id      uuid NOT NULL REFERENCES apps (id),
        user_hash   bytea NOT NULL,
        created_at  timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (app_id, user_hash)
      )`);
    await q.query(`
      INSERT INTO server_secrets (name, value)
      VALUES ('suppression', decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'))
      ON CONFLICT (name) DO NOTHING`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS user_suppressions`);
    await q.query(`DROP TABLE IF EXISTS deletions`);
    await q.query(`DELETE FROM server_secrets WHERE name = 'suppression'`);
  }
}
