import { Logger } from '@nestjs/common';
import Redis from 'ioredis';
import { MemoryRateLimitStore, RateLimitStore, WindowCount } from './rate-limit.store';

// INCRBY and start the window on its first hit, atomically; returns count and remaining ms.
const HIT_SCRIPT = `
local count = redis.call('INCRBY', KEYS[1], ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  ttl = tonumber(ARGV[2])
end
return {count, ttl}
`;

// A limiter sits on every request: a slow Redis must not become a slow API.
const COMMAND_TIMEOUT_MS = 500;
const WARN_EVERY_MS = 10_000;

type HitCommand = (key: string, cost: number, windowMs: number) => Promise<[number, number]>;

/**
 * Fixed-window counters in Redis, shared by every instance. `@nest-lab/throttler-storage-redis`
 * does not accept Nest 12 in its peer range, hence this small store behind the throttler adapter.
 *
 * When Redis cannot answer, counting falls back to this process's memory: limits then hold per
 * instance instead of across all of them, and the API keeps serving. Readiness reports it as
 * degraded.
 */
export class RedisRateLimitStore extends RateLimitStore {
  private readonly redis: Redis;
  private readonly fallback = new MemoryRateLimitStore();
  private readonly logger = new Logger('RateLimitStore');
  private lastWarning = 0;

  constructor(
    url: string,
    private readonly prefix = 'tally:rl:',
  ) {
    super();
    this.redis = new Redis(url, {
      lazyConnect: false,
      // Fail at once while disconnected rather than queueing requests behind a reconnect.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: 2000,
      commandTimeout: COMMAND_TIMEOUT_MS,
    });
    this.redis.on('error', (err: Error) => this.warn(err));
    this.redis.defineCommand('tallyHit', { numberOfKeys: 1, lua: HIT_SCRIPT });
  }

  /**
   * Waits until the connection is up, at most `timeoutMs`; it does not throw, since the store
   * counts in memory until Redis answers. Called at boot so the first requests count in Redis.
   */
  async waitForConnection(timeoutMs = 2000): Promise<boolean> {
    if (this.redis.status === 'ready') return true;
    return new Promise((resolve) => {
      const done = (ready: boolean) => {
        clearTimeout(timer);
        this.redis.off('ready', onReady);
        resolve(ready);
      };
      const onReady = () => done(true);
      const timer = setTimeout(() => done(false), timeoutMs);
      this.redis.once('ready', onReady);
    });
  }

  get client(): Redis {
    return this.redis;
  }

  private warn(err: unknown): void {
    const now = Date.now();
    if (now - this.lastWarning < WARN_EVERY_MS) return;
    this.lastWarning = now;
    const message = err instanceof Error ? err.message : String(err);
    this.logger.warn(`Redis unavailable, counting in memory on this instance: ${message}`);
  }

  async hit(key: string, cost: number, windowMs: number): Promise<WindowCount> {
    try {
      const hit = (this.redis as unknown as { tallyHit: HitCommand }).tallyHit;
      const [count, ttl] = await hit.call(this.redis, this.prefix + key, cost, windowMs);
      return { count: Number(count), resetMs: Number(ttl) };
    } catch (err) {
      this.warn(err);
      return this.fallback.hit(key, cost, windowMs);
    }
  }

  async peek(key: string): Promise<WindowCount> {
    try {
      const [[countErr, count], [ttlErr, ttl]] = (await this.redis
        .multi()
        .get(this.prefix + key)
        .pttl(this.prefix + key)
        .exec()) as [[Error | null, string | null], [Error | null, number]];
      if (countErr || ttlErr) throw countErr ?? ttlErr;
      if (count === null || ttl < 0) return { count: 0, resetMs: 0 };
      return { count: Number(count), resetMs: ttl };
    } catch (err) {
      this.warn(err);
      return this.fallback.peek(key);
    }
  }

  /** Resolves when Redis answers a PING within `timeoutMs`. */
  async ping(timeoutMs = 2000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no PING answer within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([this.redis.ping(), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    await this.fallback.close();
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}
