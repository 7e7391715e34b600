import { Inject, Module, OnApplicationShutdown } from '@nestjs/common';
import { ThrottlerModule } from '@nestjs/throttler';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { MemoryRateLimitStore, RateLimitStore } from './rate-limit.store';
import { RedisRateLimitStore } from './redis-rate-limit.store';
import { ThrottlerStorageAdapter } from './throttler-storage.adapter';

export const INGEST_THROTTLER = 'ingest';
export const READ_THROTTLER = 'read';

const storeProvider = {
  provide: RateLimitStore,
  inject: [APP_CONFIG],
  useFactory: async (config: ConfigSlice<'redisUrl' | 'redisKeyPrefix'>): Promise<RateLimitStore> => {
    if (!config.redisUrl) return new MemoryRateLimitStore();
    const store = new RedisRateLimitStore(config.redisUrl, `${config.redisKeyPrefix}rl:`);
    // Boot does not fail without Redis: the store counts in memory until Redis is back.
    await store.waitForConnection();
    return store;
  },
};

/** The rate-limit counters: in memory, or in Redis when REDIS_URL is set. */
@Module({
  providers: [storeProvider, ThrottlerStorageAdapter],
  exports: [RateLimitStore, ThrottlerStorageAdapter],
})
export class RateLimitStoreModule implements OnApplicationShutdown {
  constructor(@Inject(RateLimitStore) private readonly store: RateLimitStore) {}

  async onApplicationShutdown(): Promise<void> {
    await this.store.close();
  }
}

/** The per-key request limits; `KeyThrottlerGuard` (in auth) enforces them on a controller. */
@Module({
  imports: [
    ThrottlerModule.forRootAsync({
      imports: [RateLimitStoreModule],
      inject: [APP_CONFIG, ThrottlerStorageAdapter],
      useFactory: (
        config: ConfigSlice<'ingestRateRequests' | 'readRateRequests' | 'rateWindowMs'>,
        storage: ThrottlerStorageAdapter,
      ) => ({
        storage,
        throttlers: [
          { name: INGEST_THROTTLER, limit: config.ingestRateRequests, ttl: config.rateWindowMs },
          { name: READ_THROTTLER, limit: config.readRateRequests, ttl: config.rateWindowMs },
        ],
      }),
    }),
  ],
  exports: [ThrottlerModule],
})
export class RateLimitModule {}
