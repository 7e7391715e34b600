import { Injectable } from '@nestjs/common';
import { ThrottlerStorage } from '@nestjs/throttler';
import { RateLimitStore, retryAfterSeconds } from './rate-limit.store';

type ThrottlerStorageRecord = Awaited<ReturnType<ThrottlerStorage['increment']>>;

/** Lets @nestjs/throttler count in the shared store (memory or Redis). Fixed windows, no blocking period. */
@Injectable()
export class ThrottlerStorageAdapter implements ThrottlerStorage {
  constructor(private readonly store: RateLimitStore) {}

  async increment(key: string, ttl: number, limit: number): Promise<ThrottlerStorageRecord> {
    const window = await this.store.hit(`req:${key}`, 1, ttl);
    const count = window.count;
    const seconds = retryAfterSeconds(window);
    return {
      totalHits: count,
      timeToExpire: seconds,
      isBlocked: count > limit,
      timeToBlockExpire: count > limit ? seconds : 0,
    };
  }
}
