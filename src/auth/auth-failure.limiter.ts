import { Inject, Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { APP_CONFIG, AppConfig } from '@app/config/config';
import { AppError } from '@app/common/app-error';
import { RateLimitStore, retryAfterSeconds } from '@app/common/rate-limit/rate-limit.store';

const WINDOW_MS = 60_000;

/**
 * Slows down key guessing: after AUTH_FAILURE_LIMIT 401s from one client address in a minute,
 * that address gets 429 until the minute is over, whatever key it sends.
 */
@Injectable()
export class AuthFailureLimiter {
  constructor(
    private readonly store: RateLimitStore,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  private key(req: Request): string {
    return `authfail:${req.ip ?? req.socket.remoteAddress ?? 'unknown'}`;
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
