import { Injectable } from '@nestjs/common';
import { ThrottlerGuard } from '@nestjs/throttler';
import type { ThrottlerRequest } from '@nestjs/throttler';
import type { Request, Response } from 'express';
import { AppError } from '@app/common/app-error';
import { requestKey } from './authenticated-request';

/**
 * Per-key request limit. Runs after a key guard: the tracker is the key id, not the client
 * address, since many devices share one ingest key and one device may relay for many.
 * Sets `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset` (seconds) on every
 * response it lets through, and answers 429 with `Retry-After` past the limit.
 */
@Injectable()
export class KeyThrottlerGuard extends ThrottlerGuard {
  protected override async handleRequest(request: ThrottlerRequest): Promise<boolean> {
    const { context, limit, ttl, throttler } = request;
    const req = context.switchToHttp().getRequest<Request>();
    const res = context.switchToHttp().getResponse<Response>();
    const key = `${throttler.name}:${requestKey(req).id}`;
    const record = await this.storageService.increment(key, ttl, limit, 0, throttler.name ?? 'default');
    res.setHeader('RateLimit-Limit', String(limit));
    res.setHeader('RateLimit-Remaining', String(Math.max(0, limit - record.totalHits)));
    res.setHeader('RateLimit-Reset', String(record.timeToExpire));
    if (record.isBlocked) {
      throw new AppError('rate_limited', `More than ${limit} requests in ${ttl} ms for this key.`, {
        headers: { 'Retry-After': String(record.timeToBlockExpire) },
        extra: { limit, windowMs: ttl },
      });
    }
    return true;
  }
}
