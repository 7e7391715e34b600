import { randomUUID } from 'node:crypto';
import type { EntityManager } from 'typeorm';
import { AuditService } from '@app/audit/audit.service';
import type { AuditActor } from '@app/audit/audit.types';
import { DAY_MS } from '@app/common/time';
import { AppError } from '@app/common/app-error';
import { UUID } from '@app/common/ids';
import { Injectable } from '@app/common/di';
import { AppsService } from './apps.service';
import { IngestMode, KeyEntity, KNOWN_SCOPES } from './key.entity';
import { KeyRepository } from './key.repository';
import { DEFAULT_ROTATION_GRACE_DAYS, KeyRotation, MAX_ROTATION_GRACE_DAYS } from './key-rotation';
import { generateKey, hashKey, KeyPrefixKind, maskKey, UNUSED_AFTER_DAYS } from './key-format';
import { KeyVerifier } from './key-verifier';
import { invalidKey } from './auth-errors';

export interface KeyListing {
  id: string;
  kind: 'ingest' | 'api';
  mask: string;
  name: string | null;
  mode: IngestMode | null;
  appIds: string[];
  scopes: string[];
  createdAt: string;
  lastUsedAt: string | null;
  expiresAt: string | null;
  revokedAt: string | null;
  /** Active, and neither used nor made in the last UNUSED_AFTER_DAYS days: a candidate to revoke. */
  unused: boolean;
}

export interface KeyInfo {
  id: string;
  prefix: string;
  scopes: string[];
  expiresAt: string | null;
  apps: { id: string; name: string; timezone: string; dimensions: string[] }[];
}

/** A key's expiry `days` from now; null for a key that never expires. */
function expiryOf(days: number | null): Date | null {
  return days === null ? null : new Date(Date.now() + days * DAY_MS);
}

function iso(d: Date | null): string | null {
  return d ? d.toISOString() : null;
}

export function assertUuid(value: string, what: string): void {
  if (!UUID.test(value)) throw new AppError('invalid_body', `${what} must be a UUID, got "${value}".`);
}

/** Key administration: create, list, revoke, rotate and describe keys. */
@Injectable()
export class KeysService {
  constructor(
    private readonly keys: KeyRepository,
    private readonly apps: AppsService,
    private readonly verifier: KeyVerifier,
    private readonly audit: AuditService,
  ) {}

  async createIngestKey(
    appId: string,
    mode: IngestMode,
    name: string | null,
    actor: AuditActor,
    expiresInDays: number | null = null,
  ) {
    assertUuid(appId, 'app');
    await this.apps.assertExist([appId]);
    const expiresAt = expiryOf(expiresInDays);
    const fields = { kind: 'ingest' as const, mode, name, appIds: [appId], scopes: [], expiresAt };
    const { id, key } = await this.keys.transaction(async (keys, manager) => {
      const issued = await this.issue(mode, fields, keys);
      await this.recordCreated(issued.id, fields, actor, manager);
      return issued;
    });
    return { id, key, appId, mode, expiresAt: iso(expiresAt) };
  }

  async createApiKey(
    appIds: string[],
    scopes: string[],
    expiresInDays: number | null,
    name: string | null,
    actor: AuditActor,
  ) {
    const apps = [...new Set(appIds)];
    const grants = [...new Set(scopes)];
    if (apps.length === 0) throw new AppError('invalid_body', 'An API key needs at least one app.');
    if (grants.length === 0) throw new AppError('invalid_body', 'An API key needs at least one scope.');
    apps.forEach((id) => assertUuid(id, 'app'));
    const unknown = grants.filter((s) => !(KNOWN_SCOPES as readonly string[]).includes(s));
    if (unknown.length) {
      throw new AppError(
        'invalid_body',
        `Unknown scope: ${unknown.join(', ')} (known: ${KNOWN_SCOPES.join(', ')}).`,
      );
    }
    await this.apps.assertExist(apps);
    const expiresAt = expiryOf(expiresInDays);
    const fields = { kind: 'api' as const, mode: null, name, appIds: apps, scopes: grants, expiresAt };
    const { id, key } = await this.keys.transaction(async (keys, manager) => {
      const issued = await this.issue('api', fields, keys);
      await this.recordCreated(issued.id, fields, actor, manager);
      return issued;
    });
    return { id, key, appIds: apps, scopes: grants, expiresAt: iso(expiresAt) };
  }

  // One entry per app the key grants, so that `audit list --app` finds it under each.
  private async recordCreated(
    keyId: string,
    fields: Pick<KeyEntity, 'kind' | 'mode' | 'name' | 'appIds' | 'scopes' | 'expiresAt'>,
    actor: AuditActor,
    manager: EntityManager,
  ): Promise<void> {
    const details = {
      kind: fields.kind,
      mode: fields.mode,
      name: fields.name,
      appIds: fields.appIds,
      scopes: fields.scopes,
      expiresAt: iso(fields.expiresAt),
    };
    for (const appId of fields.appIds) {
      await this.audit.record({ action: 'key.created', actor, appId, targetId: keyId, details }, manager);
    }
  }

  private async issue(
    prefix: KeyPrefixKind,
    fields: Pick<KeyEntity, 'kind' | 'mode' | 'name' | 'appIds' | 'scopes' | 'expiresAt'>,
    keys: KeyRepository = this.keys,
  ): Promise<{ id: string; key: string }> {
    const key = generateKey(prefix);
    const id = randomUUID();
    await keys.insert({ ...fields, id, keyHash: hashKey(key), keyLast4: key.slice(-4) });
    return { id, key };
  }

  async list(appId?: string): Promise<KeyListing[]> {
    if (appId) assertUuid(appId, 'app');
    const keys = await this.keys.list(appId);
    return keys.map((k) => this.toListing(k));
  }

  /**
   * Takes a deleted app away from every key, in the caller's transaction (see
   * KeyRepository.detachApp); returns the ids of the keys revoked.
   */
  detachApp(appId: string, manager: EntityManager): Promise<string[]> {
    return this.keys.detachApp(appId, new Date(), manager);
  }

  /** Revokes a key at once; revoking a revoked key changes nothing and records nothing. */
  async revoke(id: string, actor: AuditActor): Promise<{ id: string; revokedAt: string }> {
    assertUuid(id, 'key id');
    const key = await this.keys.transaction(async (keys, manager) => {
      const { key: revoked, revokedNow } = await keys.revoke(id, new Date());
      if (revokedNow && revoked) {
        for (const appId of revoked.appIds) {
          await this.audit.record({ action: 'key.revoked', actor, appId, targetId: id }, manager);
        }
      }
      return revoked;
    });
    if (!key || !key.revokedAt) throw new AppError('not_found', `No such key: ${id}`);
    this.verifier.forgetAllCached();
    return { id: key.id, revokedAt: key.revokedAt.toISOString() };
  }

  /** The holder's view of an authenticated API key: mask, scopes, expiry and its apps by name. */
  async describe(id: string): Promise<KeyInfo> {
    const key = await this.keys.findById(id);
    // The guard admitted the key a moment ago; gone now means revoked or deleted meanwhile.
    if (!key || key.revokedAt) throw invalidKey();
    const listing = this.toListing(key);
    return {
      id: listing.id,
      prefix: listing.mask,
      scopes: listing.scopes,
      expiresAt: listing.expiresAt,
      apps: await this.apps.namesOf(key.appIds),
    };
  }

  /**
   * Replaces a key: issues a new key of the same kind, mode, name, apps and scopes, and lets the
   * old one work for `graceDays` more days (never longer than it already would). A replacement
   * for a key with an expiry gets the same lifetime, counted from now. One transaction, with the
   * old key's row locked, so the replacement and the old key's expiry exist together or not at all.
   */
  async rotate(id: string, actor: AuditActor, graceDays = DEFAULT_ROTATION_GRACE_DAYS): Promise<KeyRotation> {
    assertUuid(id, 'key id');
    if (!Number.isInteger(graceDays) || graceDays < 0 || graceDays > MAX_ROTATION_GRACE_DAYS) {
      throw new AppError(
        'invalid_body',
        `The grace period is a whole number of days from 0 to ${MAX_ROTATION_GRACE_DAYS}, got ${graceDays}.`,
      );
    }
    const rotation = await this.keys.transaction(async (keys, manager) => {
      const old = await keys.findForUpdate(id);
      const now = Date.now();
      if (!old) throw new AppError('not_found', `No such key: ${id}`);
      if (old.revokedAt) {
        throw new AppError('conflict', `Key ${id} is revoked; issue a new key instead.`);
      }
      if (old.expiresAt && old.expiresAt.getTime() <= now) {
        throw new AppError('conflict', `Key ${id} has expired; issue a new key instead.`);
      }
      const graceEnd = now + graceDays * DAY_MS;
      const oldExpiresAt = new Date(old.expiresAt ? Math.min(old.expiresAt.getTime(), graceEnd) : graceEnd);
      const lifetime = old.expiresAt ? old.expiresAt.getTime() - old.createdAt.getTime() : null;
      await keys.setExpiry(old.id, oldExpiresAt);
      const prefix: KeyPrefixKind = old.kind === 'api' ? 'api' : (old.mode as IngestMode);
      const replacement = await this.issue(
        prefix,
        {
          kind: old.kind,
          mode: old.mode,
          name: old.name,
          appIds: old.appIds,
          scopes: old.scopes,
          expiresAt: lifetime === null ? null : new Date(now + lifetime),
        },
        keys,
      );
      const details = { newKeyId: replacement.id, oldExpiresAt: oldExpiresAt.toISOString() };
      for (const appId of old.appIds) {
        await this.audit.record({ action: 'key.rotated', actor, appId, targetId: old.id, details }, manager);
      }
      return { old: { id: old.id, expiresAt: oldExpiresAt.toISOString() }, new: replacement };
    });
    this.verifier.forgetAllCached();
    return rotation;
  }

  private toListing(k: KeyEntity, now = Date.now()): KeyListing {
    const prefix: KeyPrefixKind = k.kind === 'api' ? 'api' : (k.mode as IngestMode);
    const active = k.revokedAt === null && (k.expiresAt === null || k.expiresAt.getTime() > now);
    const lastSign = Math.max(k.createdAt.getTime(), k.lastUsedAt?.getTime() ?? 0);
    return {
      id: k.id,
      kind: k.kind,
      mask: maskKey(prefix, k.keyLast4),
      name: k.name,
      mode: k.mode,
      appIds: k.appIds,
      scopes: k.scopes,
      createdAt: k.createdAt.toISOString(),
      lastUsedAt: iso(k.lastUsedAt),
      expiresAt: iso(k.expiresAt),
      revokedAt: iso(k.revokedAt),
      unused: active && now - lastSign >= UNUSED_AFTER_DAYS * DAY_MS,
    };
  }
}
