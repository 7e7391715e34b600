import { Injectable, Optional } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { AppError } from '@app/common/app-error';
import { normaliseAppId, UUID } from '@app/common/ids';
import { AppsService } from '@app/auth/apps.service';
import { KeysService } from '@app/auth/keys.service';
import { AuditService } from '@app/audit/audit.service';
import type { AuditActor } from '@app/audit/audit.types';
import { CursorSecretRepository } from '@app/common/reads/cursor-secret.repository';
import { cursorPosition, openCursor, signCursor } from '@app/common/reads/signed-cursor';
import { DeletionPosition, DeletionRepository, DeletionRow, DeletionStatus } from './deletion.repository';
import type { DeletionRequest } from './deletion-request';
import { PrivacyMetrics } from './privacy.metrics';
import { SuppressionsService } from './suppressions.service';

/**
 * How long a new suppression takes to reach every instance at most (LISTEN/NOTIFY, typically a
 * few milliseconds). A deletion with suppression starts only after it, so that no event of its
 * users that an instance accepted before hearing of the suppression can land after the deletion.
 */
export const SUPPRESSION_SETTLE_MS = 1_000;

/** One page of an app's deletions, and the cursor of the next one (null on the last page). */
export interface DeletionPage {
  deletions: DeletionView[];
  nextCursor: string | null;
}

// A cursor's body: the last deletion's creation time (epoch µs, 8 bytes) and its id (16 bytes).
const POSITION_BYTES = 8 + 16;

function encodePosition(secret: Buffer, binding: string, p: DeletionPosition): string {
  const body = Buffer.alloc(POSITION_BYTES);
  body.writeBigInt64BE(p.createdUs, 0);
  Buffer.from(p.id.replace(/-/g, ''), 'hex').copy(body, 8);
  return signCursor(secret, binding, body);
}

function decodePosition(secret: Buffer, binding: string, token: string): DeletionPosition | null {
  const body = openCursor(secret, binding, token, POSITION_BYTES);
  if (body === null || body.length !== POSITION_BYTES) return null;
  const hex = body.subarray(8).toString('hex');
  const id = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  return { createdUs: body.readBigInt64BE(0), id };
}

/** A deletion as the API and the CLI show it: counts only, never a user id. */
export interface DeletionView {
  id: string;
  appId: string;
  status: DeletionStatus;
  /** How many distinct users the request named. */
  users: number;
  suppress: boolean;
  eventsDeleted: number;
  daysRecomputed: number;
  createdAt: number;
  startedAt: number | null;
  finishedAt: number | null;
  /**
   * Once done: the users' keys outside Tally (common/user-keys.ts), the `userKey` of their
   * exported records, so that a warehouse deletes the same users. Absent before.
   */
  userKeys?: string[];
}

export function deletionView(row: DeletionRow): DeletionView {
  const keys = row.status === 'done' && row.userKeys !== null ? { userKeys: row.userKeys } : {};
  return {
    id: row.id,
    appId: row.appId,
    status: row.status,
    users: row.userCount,
    suppress: row.suppress,
    eventsDeleted: Number(row.eventsDeleted),
    daysRecomputed: row.daysRecomputed,
    createdAt: Math.round(row.createdAt),
    startedAt: row.startedAt === null ? null : Math.round(row.startedAt),
    finishedAt: row.finishedAt === null ? null : Math.round(row.finishedAt),
    ...keys,
  };
}

/** Erasure requests: stored with their suppression in one transaction, then run by a deletion job. */
@Injectable()
export class DeletionsService {
  constructor(
    private readonly deletions: DeletionRepository,
    private readonly suppressions: SuppressionsService,
    private readonly apps: AppsService,
    private readonly audit: AuditService,
    private readonly secrets: CursorSecretRepository,
    private readonly keys: KeysService,
    @Optional() private readonly metrics?: PrivacyMetrics,
  ) {}

  /**
   * Stores the deletion and, with `suppress`, the users' suppressions, in one transaction; every
   * instance hears of both when it commits. The job may start once the suppression has reached
   * every instance.
   */
  async request(req: DeletionRequest, actor: AuditActor, now = Date.now()): Promise<DeletionView> {
    await this.apps.assertExist([req.appId]);
    const stored = await this.suppressions.storedIdsOf(req.appId, req.anonymousUserIds, req.userIds);
    const id = randomUUID();
    const row = await this.deletions.transaction(async (tx) => {
      const inserted = await this.deletions.insert(tx, {
        id,
        appId: req.appId,
        userIds: stored,
        suppress: req.suppress,
        requestedBy: actor,
        notBefore: req.suppress ? now + SUPPRESSION_SETTLE_MS : now,
      });
      const details = { users: stored.length, suppress: req.suppress };
      await this.audit.record(
        { action: 'deletion.requested', actor, appId: req.appId, targetId: id, details },
        tx,
      );
      if (req.suppress) {
        const added = await this.suppressions.addStored(tx, req.appId, stored);
        const entry = { users: added, deletionId: id };
        await this.audit.record({ action: 'suppression.added', actor, appId: req.appId, details: entry }, tx);
      }
      return inserted;
    });
    // This instance refuses the users at once, without waiting for its own notification.
    if (req.suppress) await this.suppressions.reloadApp(req.appId);
    this.metrics?.requested();
    return deletionView(row);
  }

  /**
   * Deletes an app with all its data (an operator's act, from the CLI). In one transaction the
   * app is marked (listed nowhere, no new key), its keys are revoked (a key of several apps loses
   * it) and the deletion is stored; then a deletion job of kind `app` erases every row of it, and
   * survives restarts like a user erasure. `not_found` when there is no such app.
   */
  async requestAppDeletion(appId: string, actor: AuditActor, now = Date.now()): Promise<DeletionView> {
    const id = randomUUID();
    const row = await this.deletions.transaction(async (tx) => {
      const name = await this.apps.markDeleting(appId, tx);
      const revoked = await this.keys.detachApp(appId, tx);
      const inserted = await this.deletions.insert(tx, {
        id,
        appId,
        kind: 'app',
        userIds: [],
        suppress: false,
        requestedBy: actor,
        notBefore: now,
      });
      const details = { name, keysRevoked: revoked.length };
      await this.audit.record({ action: 'app.deletion_requested', actor, appId, targetId: id, details }, tx);
      return inserted;
    });
    this.metrics?.requested();
    return deletionView(row);
  }

  /** One deletion, if it belongs to one of `visibleAppIds`; otherwise `not_found`, as if unknown. */
  async get(id: string, visibleAppIds: string[] | null): Promise<DeletionView> {
    const row = UUID.test(id) ? await this.deletions.find(id.toLowerCase()) : null;
    if (!row || (visibleAppIds !== null && !visibleAppIds.includes(row.appId))) {
      throw new AppError('not_found', 'No deletion with this id.');
    }
    return deletionView(row);
  }

  /**
   * An app's deletions, newest first, `limit` a page; with `since` (epoch ms), only those done
   * since then (a warehouse sync's feed). The cursor is bound to the app and `since`.
   */
  async list(
    appId: string,
    cursor: string | undefined,
    limit: number,
    since: number | null = null,
  ): Promise<DeletionPage> {
    const app = normaliseAppId(appId);
    const binding = JSON.stringify(['deletions', app, since]);
    const secret = await this.secrets.cursorSecret();
    const after = cursorPosition(cursor, (token) => decodePosition(secret, binding, token));
    const rows = await this.deletions.listForApp(app, after, limit + 1, since);
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    const nextCursor =
      rows.length > limit
        ? encodePosition(secret, binding, { createdUs: BigInt(last.createdUs!), id: last.id })
        : null;
    return { deletions: page.map(deletionView), nextCursor };
  }
}
