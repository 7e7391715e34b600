import { DataSource, EntityManager, Repository } from 'typeorm';
import { Inject, Injectable } from '@app/common/di';
import { IngestMode, KeyEntity, KeyKind } from './key.entity';

/** The channel `revoke` notifies, with the revoked key's id as the payload (KeyRevocationRepository listens). */
export const KEY_REVOKED_CHANNEL = 'tally_key_revoked';

export interface NewKey {
  id: string;
  kind: KeyKind;
  mode: IngestMode | null;
  name: string | null;
  appIds: string[];
  scopes: string[];
  keyHash: Buffer;
  keyLast4: string;
  expiresAt: Date | null;
}

@Injectable()
export class KeyRepository {
  // The primary DataSource (injected by its class; the admin CLI passes its own), or the entity
  // manager of a transaction opened by `transaction()`.
  constructor(@Inject(DataSource) private readonly db: DataSource | EntityManager) {}

  private get repo(): Repository<KeyEntity> {
    return this.db.getRepository(KeyEntity);
  }

  /** Runs `work` in one transaction, with a repository whose statements all belong to it. */
  transaction<T>(work: (keys: KeyRepository, manager: EntityManager) => Promise<T>): Promise<T> {
    return this.db.transaction((manager) => work(new KeyRepository(manager), manager));
  }

  async insert(key: NewKey): Promise<KeyEntity> {
    await this.repo.insert(key);
    return (await this.repo.findOneByOrFail({ id: key.id })) as KeyEntity;
  }

  /** The key with this hash, revoked or not; the caller decides what is usable. */
  findByHash(hash: Buffer): Promise<KeyEntity | null> {
    return this.repo.createQueryBuilder('k').where('k.key_hash = :hash', { hash }).getOne();
  }

  findById(id: string): Promise<KeyEntity | null> {
    return this.repo.findOneBy({ id });
  }

  /** The key with this id, locked until the surrounding transaction ends; null when unknown. */
  findForUpdate(id: string): Promise<KeyEntity | null> {
    return this.repo
      .createQueryBuilder('k')
      .setLock('pessimistic_write')
      .where('k.id = :id', { id })
      .getOne();
  }

  /** Every key, or the keys that grant access to `appId`. Newest first. */
  list(appId?: string): Promise<KeyEntity[]> {
    const query = this.repo.createQueryBuilder('k').orderBy('k.created_at', 'DESC').addOrderBy('k.id', 'ASC');
    if (appId) query.where(':appId = ANY(k.app_ids)', { appId });
    return query.getMany();
  }

  /**
   * Sets revoked_at once and, in the same statement, notifies every listening instance (see
   * KeyRevocationRepository); returns the key, or null when it does not exist, and whether this
   * call revoked it.
   */
  async revoke(id: string, at: Date): Promise<{ key: KeyEntity | null; revokedNow: boolean }> {
    const notified = (await this.repo.query(
      `WITH revoked AS (
         UPDATE keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL RETURNING id
       )
       SELECT pg_notify('${KEY_REVOKED_CHANNEL}', id::text) FROM revoked`,
      [id, at],
    )) as unknown[];
    return { key: await this.repo.findOneBy({ id }), revokedNow: notified.length > 0 };
  }

  /** Sets when a key stops working. */
  /**
   * Takes an app away from every key, in the caller's transaction: a key of that app alone is
   * revoked, a key of several apps loses it. Every listening instance drops those keys from its
   * cache when the transaction commits. Returns the ids of the keys revoked.
   */
  async detachApp(appId: string, at: Date, manager: EntityManager): Promise<string[]> {
    // An UPDATE answers [rows, count] through TypeORM.
    const [revoked] = (await manager.query(
      `UPDATE keys SET revoked_at = coalesce(revoked_at, $2)
        WHERE app_ids = ARRAY[$1::uuid] RETURNING id`,
      [appId, at],
    )) as [{ id: string }[], number];
    const [narrowed] = (await manager.query(
      `UPDATE keys SET app_ids = array_remove(app_ids, $1::uuid)
        WHERE $1::uuid = ANY (app_ids) AND cardinality(app_ids) > 1 RETURNING id`,
      [appId],
    )) as [{ id: string }[], number];
    for (const { id } of [...revoked, ...narrowed]) {
      await manager.query(`SELECT pg_notify('${KEY_REVOKED_CHANNEL}', $1)`, [id]);
    }
    return revoked.map((r) => r.id);
  }

  async setExpiry(id: string, at: Date): Promise<void> {
    await this.repo.update({ id }, { expiresAt: at });
  }

  /** Records use of several keys in one statement. */
  async touch(ids: string[], at: Date): Promise<void> {
    if (ids.length === 0) return;
    await this.repo.query(
      `UPDATE keys SET last_used_at = $2
        WHERE id = ANY($1::uuid[]) AND (last_used_at IS NULL OR last_used_at < $2)`,
      [ids, at],
    );
  }
}
