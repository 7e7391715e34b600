import { Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { setTimeout as sleep } from 'node:timers/promises';
import { AuthFailureLimiter } from './auth-failure.limiter';
import { attachKey, bearerToken, RequestKey } from './authenticated-request';
import { invalidKey, wrongKeyType } from './auth-errors';
import { KeysService } from './keys.service';

/**
 * Every refused key is answered no sooner than this after its check began, whatever the reason
 * (missing, bad checksum, unknown, revoked, expired): a database lookup of an unknown key takes
 * longer than a checksum refusal or a cached revoked key, and without this floor the answer's
 * time would tell a leaked string's holder whether it was ever issued. It sits well above a
 * lookup's usual time on an index probe.
 */
export const REFUSAL_FLOOR_MS = 10;

/** The steps both key guards share: resolve the bearer key, check its kind, answer refusals alike. */
@Injectable()
export class KeyAuthenticator {
  constructor(
    private readonly keys: KeysService,
    private readonly failures: AuthFailureLimiter,
  ) {}

  async authenticate(req: Request, expected: 'ingest' | 'api'): Promise<RequestKey> {
    const started = performance.now();
    const token = bearerToken(req);
    const key = token
      ? await this.keys.authenticate(token, (lookup) => this.failures.throttleLookup(req, lookup))
      : null;
    if (key) {
      // A valid key is served whatever its address did before; of the wrong kind it is a client
      // mistake, not a guess, and is not counted.
      if (key.kind !== expected) throw wrongKeyType(expected);
      attachKey(req, key);
      return key;
    }
    const refusal = await this.failures.recordFailure(req, invalidKey());
    const wait = REFUSAL_FLOOR_MS - (performance.now() - started);
    if (wait > 0) await sleep(wait);
    throw refusal;
  }
}
