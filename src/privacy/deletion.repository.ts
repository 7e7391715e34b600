import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { ADVISORY_LOCKS } from '@app/database/advisory-locks';
import type { AuditActor } from '@app/audit/audit.types';
import { microsLiteral } from '@app/common/reads/cursor';
import { EVENT_COLUMN as c } from '@app/common/events/event-fields';

export type DeletionStatus = 'pending' | 'running' | 'done' | 'failed';
/** `users`: some users of an app; `app`: the whole app, every row of it. */
export type DeletionKind = 'users' | 'app';

/** A deletion as stored; `userIds` is null once the deletion has ended. */
export interface DeletionRow {
  id: string;
  appId: string;
  kind: DeletionKind;
  status: DeletionStatus;
  userCount: number;
  userIds: string[] | null;
  suppress: boolean;
  requestedBy: AuditActor;
  stepsDone: string[];
  days: string[];
  eventsDeleted: number;
  daysRecomputed: number;
  attempts: number;
  notBefore: number;
  createdAt: number;
  startedAt: number | null;
  finishedAt: number | null;
  /** The users' keys outside Tally (common/user-keys.ts), once the deletion is done. */
  userKeys: string[] | null;
  /** Epoch microseconds as a decimal string, for the listing's cursor (listForApp only). */
  createdUs?: string;
}

/** Where a page of an app's deletions ended: the last one's creation time (epoch µs) and id. */
export interface DeletionPosition {
  createdUs: bigint;
  id: string;
}

export interface NewDeletion {
  id: string;
  appId: string;
  /** Default `users`. */
  kind?: DeletionKind;
  userIds: string[];
  suppress: boolean;
  requestedBy: AuditActor;
  /** The job may not start before this (epoch ms): suppression must be in force everywhere first. */
  notBefore: number;
}

/** Wakes the deletion runners of every instance (payload: the deletion id). */
export const DELETIONS_CHANNEL = 'tally_deletions';

// A difference of timestamps and extract() of an interval are IMMUTABLE, as Citus requires of
// what an INSERT or UPDATE returns (see reread); extract() of a timestamptz is only STABLE.
const ms = (column: string) => `(extract(epoch FROM ${column} - 'epoch'::timestamptz) * 1000)::float8`;

const COLUMNS = `id, app_id AS "appId", kind, status, user_count AS "userCount", user_ids AS "userIds",
  suppress, requested_by AS "requestedBy", steps_done AS "stepsDone", days::text[] AS days, events_deleted::float8 AS "eventsDeleted",
  days_recomputed AS "daysRecomputed", attempts, ${ms('not_before')} AS "notBefore",
  ${ms('created_at')} AS "createdAt", ${ms('started_at')} AS "startedAt",
  ${ms('finished_at')} AS "finishedAt", user_keys AS "userKeys"`;

/** The `deletions` table: requests and the state of their jobs. */
@Injectable()
export class DeletionRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /** Stores a new deletion and wakes the runners when the transaction commits. */
  async insert(tx: EntityManager, d: NewDeletion): Promise<DeletionRow> {
    await tx.query(
      `INSERT INTO deletions (id, app_id, user_count, user_ids, suppress, requested_by, not_before, kind)
       VALUES ($1, $2, $3, $4::text[], $5, $6::jsonb, to_timestamp($7::float8 / 1000), $8)`,
      [
        d.id,
        d.appId,
        d.userIds.length,
        d.userIds,
        d.suppress,
        JSON.stringify(d.requestedBy),
        d.notBefore,
        d.kind ?? 'users',
      ],
    );
    await tx.query(`SELECT pg_notify($1, $2)`, [DELETIONS_CHANNEL, d.id]);
    return this.reread(tx, d.id);
  }

  /**
   * Stores a deletion from the erasure ledger under its own id, unless the database already has
   * it (another instance got there first); returns false then.
   */
  async insertFromLedger(tx: EntityManager, d: NewDeletion & { userCount: number }): Promise<boolean> {
    const rows = (await tx.query(
      `INSERT INTO deletions (id, app_id, user_count, user_ids, suppress, requested_by, not_before, kind)
       VALUES ($1, $2, $3, $4::text[], $5, $6::jsonb, to_timestamp($7::float8 / 1000), $8)
       ON CONFLICT DO NOTHING RETURNING id`,
      [
        d.id,
        d.appId,
        d.userCount,
        d.userIds,
        d.suppress,
        JSON.stringify(d.requestedBy),
        d.notBefore,
        d.kind ?? 'users',
      ],
    )) as unknown[];
    return rows.length > 0;
  }

  /**
   * The distinct stored user ids of an app, in its events and its quarantine: what a ledger
   * entry's pseudonyms are matched against after a restore.
   */
  async storedUsersOf(appId: string): Promise<string[]> {
    const user = c.anonymousUserId;
    const rows = (await this.db.query(
      `SELECT ${user} AS id FROM events WHERE ${c.appId} = $1 AND ${user} IS NOT NULL
       UNION
       SELECT ${user} FROM quarantine WHERE ${c.appId} = $1 AND ${user} IS NOT NULL`,
      [appId],
    )) as { id: string }[];
    return rows.map((r) => r.id);
  }

  async find(id: string): Promise<DeletionRow | null> {
    const rows = (await this.db.query(`SELECT ${COLUMNS} FROM deletions WHERE id = $1`, [
      id,
    ])) as DeletionRow[];
    return rows[0] ?? null;
  }

  /**
   * The tables that hold rows of an app (a column `app_id`), but for the audit log (append-only:
   * it records the deletion) and `deletions` (which holds the app deletion's own record); a
   * partition is reached through its parent. A table a later migration adds is reached too.
   */
  async appTables(manager: EntityManager = this.db.manager): Promise<string[]> {
    const rows = (await manager.query(
      `SELECT c.relname AS name
         FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
         JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE a.attname = 'app_id' AND NOT a.attisdropped AND c.relkind IN ('r', 'p')
          AND NOT c.relispartition AND n.nspname = current_schema()
          AND c.relname NOT IN ('audit_log', 'deletions')
        ORDER BY c.relname`,
    )) as { name: string }[];
    return rows.map((r) => r.name);
  }

  /** Deletes every row of `appId` from one table (a name from appTables); returns how many. */
  async deleteAppRows(table: string, appId: string, manager: EntityManager): Promise<number> {
    if (!/^[a-z_][a-z0-9_]*$/.test(table)) throw new Error(`not a table name: ${table}`);
    const rows = (await manager.query(
      `WITH gone AS (DELETE FROM ${table} WHERE app_id = $1 RETURNING 1) SELECT count(*)::int AS n FROM gone`,
      [appId],
    )) as { n: number }[];
    return rows[0].n;
  }

  /**
   * The end of an app's deletion, in one transaction: its keys, its user deletions' records and
   * the app's own row go; the app deletion's record stays.
   */
  async deleteAppRecord(appId: string, deletionId: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.query(`DELETE FROM keys WHERE app_ids = ARRAY[$1::uuid]`, [appId]);
      await tx.query(
        `UPDATE keys SET app_ids = array_remove(app_ids, $1::uuid) WHERE $1::uuid = ANY (app_ids)`,
        [appId],
      );
      await tx.query(`DELETE FROM deletions WHERE app_id = $1 AND id <> $2`, [appId, deletionId]);
      await tx.query(`DELETE FROM apps WHERE id = $1`, [appId]);
    });
  }

  /**
   * An app's deletions, newest first by (created_at, id), strictly after `after`; with
   * `finishedSince` (epoch ms), only those done since then.
   */
  async listForApp(
    appId: string,
    after: DeletionPosition | null,
    limit: number,
    finishedSince: number | null = null,
  ): Promise<DeletionRow[]> {
    const params: unknown[] = [appId, limit];
    let where = 'app_id = $1';
    if (after !== null) {
      params.push(microsLiteral(after.createdUs), after.id);
      where += ` AND (created_at, id) < ($${params.length - 1}::timestamptz, $${params.length}::uuid)`;
    }
    if (finishedSince !== null) {
      params.push(finishedSince);
      where += ` AND status = 'done' AND finished_at >= to_timestamp($${params.length}::float8 / 1000)`;
    }
    return (await this.db.query(
      `SELECT ${COLUMNS}, (extract(epoch FROM created_at) * 1000000)::bigint::text AS "createdUs"
         FROM deletions WHERE ${where} ORDER BY created_at DESC, id DESC LIMIT $2`,
      params,
    )) as DeletionRow[];
  }

  /** Deletions not ended yet, oldest first: the runners' queue. */
  async unfinished(limit: number): Promise<{ id: string; notBefore: number }[]> {
    return (await this.db.query(
      `SELECT id, ${ms('not_before')} AS "notBefore" FROM deletions
        WHERE status IN ('pending', 'running') ORDER BY not_before, id LIMIT $1`,
      [limit],
    )) as { id: string; notBefore: number }[];
  }

  /**
   * Runs `work` while holding the deletion's advisory lock on a dedicated connection, so that
   * one instance at a time runs a given deletion. A process that dies closes the connection, and
   * PostgreSQL lets the lock go. Returns false, without running `work`, when another session holds it.
   */
  async withDeletionLock(id: string, work: () => Promise<void>): Promise<boolean> {
    const runner = this.db.createQueryRunner();
    try {
      await runner.connect();
      const [row] = (await runner.query(`SELECT pg_try_advisory_lock($1::int, hashtext($2)) AS locked`, [
        ADVISORY_LOCKS.deletions,
        id,
      ])) as { locked: boolean }[];
      if (!row.locked) return false;
      try {
        await work();
      } finally {
        await runner
          .query(`SELECT pg_advisory_unlock($1::int, hashtext($2))`, [ADVISORY_LOCKS.deletions, id])
          .catch(() => undefined);
      }
      return true;
    } finally {
      await runner.release();
    }
  }

  async markRunning(id: string): Promise<void> {
    // Two statements: Citus refuses a non-IMMUTABLE function such as now() inside coalesce().
    await this.db.query(
      `UPDATE deletions SET started_at = now()
        WHERE id = $1 AND status IN ('pending', 'running') AND started_at IS NULL`,
      [id],
    );
    await this.db.query(
      `UPDATE deletions SET status = 'running' WHERE id = $1 AND status IN ('pending', 'running')`,
      [id],
    );
  }

  /** Counts a failed attempt (an interruption by a crash or a shutdown is not one). */
  async countFailure(id: string): Promise<void> {
    await this.db.query(`UPDATE deletions SET attempts = attempts + 1 WHERE id = $1`, [id]);
  }

  async markStepDone(id: string, step: string): Promise<void> {
    await this.db.query(
      `UPDATE deletions SET steps_done = array_append(steps_done, $2)
        WHERE id = $1 AND NOT ($2 = ANY (steps_done))`,
      [id, step],
    );
  }

  async setDaysRecomputed(id: string, days: number): Promise<void> {
    await this.db.query(`UPDATE deletions SET days_recomputed = $2 WHERE id = $1`, [id, days]);
  }

  /** Ends a deletion and forgets its user ids, in the caller's transaction. */
  async finish(
    tx: EntityManager,
    id: string,
    status: 'done' | 'failed',
    error: string | null,
    userKeys: string[] | null = null,
  ): Promise<DeletionRow> {
    await tx.query(
      `UPDATE deletions SET status = $2, user_ids = NULL, finished_at = now(), error = $3, user_keys = $4::text[]
        WHERE id = $1`,
      [id, status, error, userKeys],
    );
    return this.reread(tx, id);
  }

  transaction<T>(work: (tx: EntityManager) => Promise<T>): Promise<T> {
    return this.db.transaction(work);
  }

  /**
   * A deletion as the caller's transaction sees it, after a write: read back rather than returned
   * by the write, since Citus allows only IMMUTABLE expressions in RETURNING and the dates of
   * `days` are rendered as text by a STABLE function.
   */
  private async reread(tx: EntityManager, id: string): Promise<DeletionRow> {
    const rows = (await tx.query(`SELECT ${COLUMNS} FROM deletions WHERE id = $1`, [id])) as DeletionRow[];
    return rows[0];
  }
}
