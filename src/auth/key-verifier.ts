import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { Inject, Injectable } from '@app/common/di';
import { AppsService } from './apps.service';
import { KeyEntity } from './key.entity';
import { KeyRepository } from './key.repository';
import { hashKey, parseKey } from './key-format';
import type { RequestKey } from './authenticated-request';

const CACHE_MAX_ENTRIES = 10_000;

/**
 * Verifies a presented key string: its checksum, then this instance's cache of key rows, then the
 * database. It also batches the keys' last-used times (KeyUsageFlusher writes them). Key
 * administration (KeysService) drops the cache when it revokes or rotates a key.
 */
@Injectable()
export class KeyVerifier {
  // hash (hex) → the key row and when it was read. A revocation is announced to every instance
  // at once (KeyRevocationListener); when that notification is missed, entries are still never
  // served past KEY_CACHE_TTL_MS (at most 30 s).
  // An ingest key's entry also holds its app's time zone, which names the rollup days ingest marks.
  private readonly cache = new Map<string, { key: KeyEntity | null; readAt: number; timezone?: string }>();
  // hash (hex) of well-formed keys a lookup found unknown → when; trusted for KEY_CACHE_TTL_MS.
  private readonly unknown = new Map<string, number>();
  private readonly used = new Set<string>();

  constructor(
    private readonly keys: KeyRepository,
    private readonly apps: AppsService,
    @Inject(APP_CONFIG) private readonly config: ConfigSlice<'keyCacheTtlMs'>,
  ) {}

  /**
   * Resolves a presented key to a usable key, or null when it is malformed, unknown, revoked
   * or expired. The checksum refuses mistyped keys before any lookup; a well-formed key that a
   * lookup found unknown a moment ago is refused from memory. `gate` wraps the database lookup
   * (the caller throttles the lookups of a client that keeps presenting unknown keys).
   */
  async verify(
    presented: string,
    gate: <T>(lookup: () => Promise<T>) => Promise<T> = (lookup) => lookup(),
  ): Promise<RequestKey | null> {
    if (!parseKey(presented)) return null;
    const hash = hashKey(presented);
    const cacheKey = hash.toString('hex');
    const now = Date.now();
    let entry = this.cache.get(cacheKey);
    if (!entry || now - entry.readAt >= this.config.keyCacheTtlMs) {
      const unknownSince = this.unknown.get(cacheKey);
      if (unknownSince !== undefined && now - unknownSince < this.config.keyCacheTtlMs) return null;
      entry = await this.lookUp(hash, cacheKey, now, gate);
    }
    const key = entry.key;
    if (!key || key.revokedAt || (key.expiresAt && key.expiresAt.getTime() <= now)) return null;
    this.used.add(key.id);
    return {
      id: key.id,
      kind: key.kind,
      mode: key.mode,
      appIds: key.appIds,
      scopes: key.scopes,
      timezone: entry.timezone,
    };
  }

  /** Reads a key row (and an ingest key's time zone) and remembers what it found. */
  private async lookUp(
    hash: Buffer,
    cacheKey: string,
    now: number,
    gate: <T>(lookup: () => Promise<T>) => Promise<T>,
  ): Promise<{ key: KeyEntity | null; readAt: number; timezone?: string }> {
    const key = await gate(() => this.keys.findByHash(hash));
    const timezone =
      key?.kind === 'ingest' ? ((await this.apps.timezoneOf(key.appIds[0])) ?? undefined) : undefined;
    const entry = { key, readAt: now, timezone };
    if (key) {
      if (this.cache.size >= CACHE_MAX_ENTRIES) this.cache.clear();
      this.cache.set(cacheKey, entry);
      this.unknown.delete(cacheKey);
    } else {
      // Nobody can present a key before it is issued (256 random bits), so remembering an
      // unknown hash never delays a new key; it spares the database repeated guesses.
      if (this.unknown.size >= CACHE_MAX_ENTRIES) this.unknown.clear();
      this.unknown.set(cacheKey, now);
    }
    return entry;
  }

  /** Drops a key from this instance's cache, so that its next use reads the database. */
  forgetCached(keyId: string): void {
    for (const [hash, entry] of this.cache) {
      if (entry.key?.id === keyId) this.cache.delete(hash);
    }
  }

  forgetAllCached(): void {
    this.cache.clear();
  }

  /** Writes the batched last-used times. */
  async flushLastUsed(): Promise<void> {
    if (this.used.size === 0) return;
    const ids = [...this.used];
    this.used.clear();
    await this.keys.touch(ids, new Date()).catch(() => ids.forEach((id) => this.used.add(id)));
  }
}
