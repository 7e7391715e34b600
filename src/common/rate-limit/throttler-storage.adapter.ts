import { Injectable } from '@nestjs/common';
import { ThrottlerStorage } from '@nestjs/throttler';
import { RateLimitStore } from './rate-limit.store';

type ThrottlerStorageRecord = Awaited<ReturnType<ThrottlerStorage['increment']>>;

/** Lets @nestjs/throttler count in the shared store (memory or Redis). Fixed windows, no blocking period. */
@Injectable()
export class ThrottlerStorageAdapter implements ThrottlerStorage {
  constructor(private readonly store: RateLimitStore) {}

  async increment(key: string, ttl: number, limit: number): Promise<ThrottlerStorageRecord> {
    const { count, resetMs } = await this.store.hit(`req:${key}`, 1, ttl);
    const seconds = Math.max(1, Math.ceil(resetMs / 1000));
    return {
      totalHits: count,
      timeToExpire: seconds,
      isBlocked: count > limit,
      timeToBlockExpire: count > limit ? seconds : 0,
    };
  }
}
