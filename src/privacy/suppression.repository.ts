import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';

/** Tells every instance that an app's suppression list changed (payload: the app id). */
export const SUPPRESSIONS_CHANNEL = 'tally_suppressions';

export interface SuppressionRow {
  appId: string;
  /** Hex HMAC of the app and user ids (src/common/suppressions/user-suppressions.ts). */
  userHash: string;
  createdAt: number;
}

/** The `user_suppressions` table and its server secret. */
@Injectable()
export class SuppressionRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /** The HMAC key of the suppression list, shared by every instance. */
  async hashKey(): Promise<Buffer> {
    const rows = (await this.db.query(`SELECT value FROM server_secrets WHERE name = 'suppression'`)) as {
      value: Buffer;
    }[];
    if (!rows.length) throw new Error('server_secrets has no suppression row');
    return rows[0].value;
  }

  /** Adds hashes in the caller's transaction; every instance reloads the app after the commit. */
  async add(tx: EntityManager, appId: string, hashes: Buffer[]): Promise<number> {
    const added = (await tx.query(
      `INSERT INTO user_suppressions (app_id, user_hash) SELECT $1, unnest($2::bytea[])
       ON CONFLICT DO NOTHING RETURNING 1`,
      [appId, hashes],
    )) as unknown[];
    await tx.query(`SELECT pg_notify($1, $2)`, [SUPPRESSIONS_CHANNEL, appId]);
    return added.length;
  }

  async remove(tx: EntityManager, appId: string, hash: Buffer): Promise<boolean> {
    const [, removed] = (await tx.query(
      `DELETE FROM user_suppressions WHERE app_id = $1 AND user_hash = $2`,
      [appId, hash],
    )) as [unknown, number];
    await tx.query(`SELECT pg_notify($1, $2)`, [SUPPRESSIONS_CHANNEL, appId]);
    return removed > 0;
  }

  async list(appId: string): Promise<SuppressionRow[]> {
    return (await this.db.query(
      `SELECT app_id AS "appId", encode(user_hash, 'hex') AS "userHash",
              (extract(epoch FROM created_at) * 1000)::float8 AS "createdAt"
         FROM user_suppressions WHERE app_id = $1 ORDER BY created_at, user_hash`,
      [appId],
    )) as SuppressionRow[];
  }

  /** Every app's hashes, for an instance's copy of the list. */
  async all(): Promise<Map<string, string[]>> {
    const rows = (await this.db.query(
      `SELECT app_id AS "appId", array_agg(encode(user_hash, 'hex')) AS hashes
         FROM user_suppressions GROUP BY app_id`,
    )) as { appId: string; hashes: string[] }[];
    return new Map(rows.map((r) => [r.appId, r.hashes]));
  }

  async hashesOf(appId: string): Promise<string[]> {
    const rows = (await this.db.query(
      `SELECT encode(user_hash, 'hex') AS h FROM user_suppressions WHERE app_id = $1`,
      [appId],
    )) as { h: string }[];
    return rows.map((r) => r.h);
  }

  transaction<T>(work: (tx: EntityManager) => Promise<T>): Promise<T> {
    return this.db.transaction(work);
  }
}
