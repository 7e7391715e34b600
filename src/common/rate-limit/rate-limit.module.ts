import { Global, Inject, Module, OnApplicationShutdown } from '@nestjs/common';
import { ThrottlerModule } from '@nestjs/throttler';
import { APP_CONFIG, AppConfig } from '@app/config/config';
import { MemoryRateLimitStore, RateLimitStore } from './rate-limit.store';
import { RedisRateLimitStore } from './redis-rate-limit.store';
import { ThrottlerStorageAdapter } from './throttler-storage.adapter';
import { KeyThrottlerGuard } from './key-throttler.guard';
import { ReadConcurrencyInterceptor, ReadSlots } from './read-concurrency.interceptor';

export const INGEST_THROTTLER = 'ingest';
export const READ_THROTTLER = 'read';

const storeProvider = {
  provide: RateLimitStore,
  inject: [APP_CONFIG],
  useFactory: async (config: AppConfig): Promise<RateLimitStore> => {
    if (!config.redisUrl) return new MemoryRateLimitStore();
    const store = new RedisRateLimitStore(config.redisUrl, `${config.redisKeyPrefix}rl:`);
    // Boot does not fail without Redis: the store counts in memory until Redis is back.
    await store.waitForConnection();
    return store;
  },
};

@Global()
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

@Global()
@Module({
  imports: [
    ThrottlerModule.forRootAsync({
      imports: [RateLimitStoreModule],
      inject: [APP_CONFIG, ThrottlerStorageAdapter],
      useFactory: (config: AppConfig, storage: ThrottlerStorageAdapter) => ({
        storage,
        throttlers: [
          { name: INGEST_THROTTLER, limit: config.ingestRateRequests, ttl: config.rateWindowMs },
          { name: READ_THROTTLER, limit: config.readRateRequests, ttl: config.rateWindowMs },
        ],
      }),
    }),
  ],
  providers: [KeyThrottlerGuard, ReadSlots, ReadConcurrencyInterceptor],
  exports: [ThrottlerModule, KeyThrottlerGuard, ReadSlots, ReadConcurrencyInterceptor],
})
export class RateLimitModule {}
