import { Inject, Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { APP_CONFIG, AppConfig } from '@app/config/config';
import { AppError } from '@app/common/app-error';
import { RateLimitStore, retryAfterSeconds } from '@app/common/rate-limit/rate-limit.store';
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
 * Slows down key guessing: after AUTH_FAILURE_LIMIT unknown or invalid keys from one client
 * address and one key prefix in a minute, that address gets 429 for keys of that prefix until
 * the minute is over. Keying by prefix as well keeps a guesser of ingest keys from locking out
 * read clients behind the same NAT, and the other way round. A valid key of the wrong kind is
 * a client mistake, not a guess, and is not counted.
 */
@Injectable()
export class AuthFailureLimiter {
  constructor(
    private readonly store: RateLimitStore,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  private key(req: Request): string {
    const address = req.ip ?? req.socket.remoteAddress ?? 'unknown';
    return `authfail:${keyPrefixClass(bearerToken(req))}:${address}`;
  }

  async assertNotBlocked(req: Request): Promise<void> {
    const window = await this.store.peek(this.key(req));
    if (window.count >= this.config.authFailureLimit) {
      throw new AppError(
        'too_many_auth_failures',
        'Too many requests with invalid keys from this address. Try again later.',
        { headers: { 'Retry-After': String(retryAfterSeconds(window)) } },
      );
    }
  }

  async recordFailure(req: Request): Promise<void> {
    await this.store.hit(this.key(req), 1, WINDOW_MS);
  }
}
