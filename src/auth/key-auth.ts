import { Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { setTimeout as sleep } from 'node:timers/promises';
import { AuthFailureLimiter } from './auth-failure.limiter';
import { attachKey, bearerToken, RequestKey } from './authenticated-request';
import { invalidKey, wrongKeyType } from './auth-errors';
import { KeyVerifier } from './key-verifier';

/**
 * Every refused key is answered no sooner than this after its check began, whatever the reason
 * (missing, bad checksum, unknown, revoked, expired): a database lookup of an unknown key takes
 * longer than a checksum refusal or a cached revoked key, and without this floor the answer's
 * time would tell a leaked string's holder whether it was ever issued. It sits well above a
 * lookup's usual time on an index probe; when lookups get slower (a loaded database), the floor
 * rises with them (LookupTimes).
 */
export const REFUSAL_FLOOR_MS = 10;
const RECENT_LOOKUPS = 64;
// However slow the database, a refusal holds its connection no longer than this.
const MAX_REFUSAL_FLOOR_MS = 1000;

/**
 * The durations of this instance's last key lookups. The refusal floor is at least twice their
 * 90th percentile, so that a slow database does not make unknown keys stand out again.
 */
export class LookupTimes {
  private readonly recent: number[] = [];
  private next = 0;
  private floor = REFUSAL_FLOOR_MS;

  record(ms: number): void {
    if (this.recent.length < RECENT_LOOKUPS) this.recent.push(ms);
    else this.recent[this.next] = ms;
    this.next = (this.next + 1) % RECENT_LOOKUPS;
    const sorted = [...this.recent].sort((a, b) => a - b);
    const p90 = sorted[Math.floor(sorted.length * 0.9)];
    this.floor = Math.min(MAX_REFUSAL_FLOOR_MS, Math.max(REFUSAL_FLOOR_MS, 2 * p90));
  }

  floorMs(): number {
    return this.floor;
  }
}

/** The steps both key guards share: resolve the bearer key, check its kind, answer refusals alike. */
@Injectable()
export class KeyAuthenticator {
  private readonly lookups = new LookupTimes();

  constructor(
    private readonly keys: KeyVerifier,
    private readonly failures: AuthFailureLimiter,
  ) {}

  /** `token`: the key as the client sent it; by default the request's Bearer token. */
  async authenticate(
    req: Request,
    expected: 'ingest' | 'api',
    token: string | null = bearerToken(req),
  ): Promise<RequestKey> {
    const started = performance.now();
    const key = token
      ? await this.keys.verify(token, (lookup) => this.failures.throttleLookup(req, () => this.timed(lookup)))
      : null;
    if (key) {
      // A valid key is served whatever its address did before; of the wrong kind it is a client
      // mistake, not a guess, and is not counted.
      if (key.kind !== expected) throw wrongKeyType(expected);
      attachKey(req, key);
      return key;
    }
    const refusal = await this.failures.recordFailure(req, invalidKey());
    const wait = this.lookups.floorMs() - (performance.now() - started);
    if (wait > 0) await sleep(wait);
    throw refusal;
  }

  private async timed<T>(lookup: () => Promise<T>): Promise<T> {
    const started = performance.now();
    try {
      return await lookup();
    } finally {
      this.lookups.record(performance.now() - started);
    }
  }
}
