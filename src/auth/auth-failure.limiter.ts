import { Inject, Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { AppError } from '@app/common/app-error';
import { RateLimitStore, retryAfterSeconds, WindowCount } from '@app/common/rate-limit/rate-limit.store';
import { bearerToken } from './authenticated-request';

const WINDOW_MS = 60_000;
const PREFIX = /^tly_(live|test|api)_/;

/**
 * The family a presented key claims by its prefix: `live`, `test`, `api`, or `other` for
 * anything else (no key, another scheme, no Tally prefix). Its validity does not matter here.
 */
export function keyPrefixClass(token: string | null): 'live' | 'test' | 'api' | 'other' {
  const match = token ? PREFIX.exec(token) : null;
  return match ? (match[1] as 'live' | 'test' | 'api') : 'other';
}

/**
 * Counts refused keys (missing, malformed, unknown, revoked, expired) per client address and
 * key prefix over a minute. Past AUTH_FAILURE_LIMIT, further refusals from that address are
 * answered 429 instead of 401, and its database lookups of keys the instance does not know are
 * run one at a time. It never refuses a key that is valid: brute force against 256-bit secrets
 * is hopeless, so the limit is there to slow a misbehaving client and to bound what its lookups
 * cost the database, not to guard the secrets. A valid key of the wrong kind is a client
 * mistake, not a guess, and is not counted.
 */
@Injectable()
export class AuthFailureLimiter {
  // Per blocked address: the tail of its chain of lookups.
  private readonly lookups = new Map<string, Promise<unknown>>();

  constructor(
    private readonly store: RateLimitStore,
    @Inject(APP_CONFIG) private readonly config: ConfigSlice<'authFailureLimit'>,
  ) {}

  private key(req: Request): string {
    const address = req.ip ?? req.socket.remoteAddress ?? 'unknown';
    return `authfail:${keyPrefixClass(bearerToken(req))}:${address}`;
  }

  /**
   * Runs `lookup` (a database lookup of a well-formed key this instance does not know) at once,
   * or, for an address past the limit, after that address's previous lookups have ended.
   */
  async throttleLookup<T>(req: Request, lookup: () => Promise<T>): Promise<T> {
    const key = this.key(req);
    const window = await this.store.peek(key);
    if (window.count < this.config.authFailureLimit) return lookup();
    const previous = this.lookups.get(key) ?? Promise.resolve();
    const mine = previous.then(lookup, lookup);
    const tail = mine.catch(() => undefined);
    this.lookups.set(key, tail);
    void tail.then(() => {
      if (this.lookups.get(key) === tail) this.lookups.delete(key);
    });
    return mine;
  }

  /** Counts a refused key; the error to answer with: 401 `invalid_key`, or 429 past the limit. */
  async recordFailure(req: Request, refusal: AppError): Promise<AppError> {
    const window: WindowCount = await this.store.hit(this.key(req), 1, WINDOW_MS);
    if (window.count <= this.config.authFailureLimit) return refusal;
    return new AppError(
      'too_many_auth_failures',
      'Too many requests with invalid keys from this address. Try again later.',
      { headers: { 'Retry-After': String(retryAfterSeconds(window)) } },
    );
  }
}
