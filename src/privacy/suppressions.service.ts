import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { AppError } from '@app/common/app-error';
import { normaliseAppId, UUID } from '@app/common/ids';
import { suppressionHash, UserSuppressions } from '@app/common/suppressions/user-suppressions';
import { AppsService } from '@app/auth/apps.service';
import { AuditService } from '@app/audit/audit.service';
import type { AuditActor } from '@app/audit/audit.types';
import { identifierKind, pseudonymise, pseudonymiseAccount } from '@app/ingest/pii';
import { SuppressionRepository, SuppressionRow } from './suppression.repository';

/**
 * The suppression list: users of an app whose new events ingest refuses. Stored and matched as a
 * keyed hash of the user id in its stored form, so the list never holds the ids themselves.
 */
@Injectable()
export class SuppressionsService {
  private key: Buffer | null = null;

  constructor(
    private readonly suppressions: SuppressionRepository,
    private readonly apps: AppsService,
    private readonly registry: UserSuppressions,
    private readonly audit: AuditService,
  ) {}

  /** Fills this instance's copy of the list (at boot, and when the channel reconnects). */
  async loadAll(): Promise<void> {
    this.registry.setKey(await this.hashKey());
    this.registry.replaceAll(await this.suppressions.all());
  }

  /** Reloads one app's list after a notification. */
  async reloadApp(appId: string): Promise<void> {
    this.registry.replaceApp(appId, await this.suppressions.hashesOf(appId));
  }

  /**
   * The id as ingest stores it: an email or phone id becomes the app's pseudonym of it
   * (src/ingest/pii.ts), other ids stay as they are.
   */
  async storedUserIds(appId: string, ids: string[]): Promise<string[]> {
    if (!ids.some((id) => identifierKind(id) !== null)) return ids;
    const secret = await this.apps.piiSecret(appId);
    const stored = ids.map((id) => {
      const kind = identifierKind(id);
      return kind === null ? id : pseudonymise(secret, kind, id);
    });
    return [...new Set(stored)];
  }

  /**
   * The stored ids of users named by id (as ingest would store them) and by account id (the
   * pseudonym the SDK formats store for a Segment `userId` or PostHog `distinct_id`).
   */
  async storedIdsOf(appId: string, ids: string[], accountIds: string[]): Promise<string[]> {
    const stored = await this.storedUserIds(appId, ids);
    if (!accountIds.length) return stored;
    const secret = await this.apps.piiSecret(appId);
    return [...new Set([...stored, ...accountIds.map((id) => pseudonymiseAccount(secret, id))])];
  }

  /** The pseudonyms (hex) under which the suppression list keeps these stored user ids. */
  async hashesOf(appId: string, storedIds: string[]): Promise<string[]> {
    const key = await this.hashKey();
    return storedIds.map((id) => suppressionHash(key, appId, id).toString('hex'));
  }

  /** Suppresses users by their pseudonyms (hex, see hashesOf), in the caller's transaction. */
  addHashes(tx: EntityManager, appId: string, hashes: string[]): Promise<number> {
    return this.suppressions.add(
      tx,
      appId,
      hashes.map((h) => Buffer.from(h, 'hex')),
    );
  }

  /** Suppresses stored user ids, in the caller's transaction. Returns how many were new. */
  async addStored(tx: EntityManager, appId: string, storedIds: string[]): Promise<number> {
    const key = await this.hashKey();
    return this.suppressions.add(
      tx,
      appId,
      storedIds.map((id) => suppressionHash(key, appId, id)),
    );
  }

  async list(appId: string): Promise<SuppressionRow[]> {
    return this.suppressions.list(checkAppId(appId));
  }

  /** Lifts the suppression of one user (the id as sent by the app); false when it was not listed. */
  async remove(appId: string, userId: string, actor: AuditActor): Promise<boolean> {
    const app = checkAppId(appId);
    const [stored] = await this.storedUserIds(app, [userId]);
    const hash = suppressionHash(await this.hashKey(), app, stored);
    const removed = await this.suppressions.transaction(async (tx) => {
      const gone = await this.suppressions.remove(tx, app, hash);
      if (gone) {
        const entry = { action: 'suppression.removed' as const, actor, appId: app, details: { users: 1 } };
        await this.audit.record(entry, tx);
      }
      return gone;
    });
    await this.reloadApp(app);
    return removed;
  }

  private async hashKey(): Promise<Buffer> {
    return (this.key ??= await this.suppressions.hashKey());
  }
}

function checkAppId(appId: string): string {
  if (!UUID.test(appId)) throw new AppError('invalid_query', `appId must be a UUID, got "${appId}"`);
  return normaliseAppId(appId);
}
