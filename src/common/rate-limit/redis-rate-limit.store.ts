import Redis from 'ioredis';
import { RateLimitStore, WindowCount } from './rate-limit.store';

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

export class RedisRateLimitStore extends RateLimitStore {
  private readonly redis: Redis;

  constructor(
    url: string,
    private readonly prefix = 'tally:rl:',
  ) {
    super();
    this.redis = new Redis(url, {
      lazyConnect: false,
      maxRetriesPerRequest: 1,
      enableOfflineQueue: true,
      connectTimeout: 2000,
    });
    this.redis.on('error', () => undefined);
    this.redis.defineCommand('tallyHit', { numberOfKeys: 1, lua: HIT_SCRIPT });
  }

  get client(): Redis {
    return this.redis;
  }

  async hit(key: string, cost: number, windowMs: number): Promise<WindowCount> {
    const hit = (this.redis as unknown as { tallyHit: (...a: unknown[]) => Promise<[number, number]> })
      .tallyHit;
    const [count, ttl] = await hit.call(this.redis, this.prefix + key, cost, windowMs);
    return { count: Number(count), resetMs: Number(ttl) };
  }

  async peek(key: string): Promise<WindowCount> {
    const [[, count], [, ttl]] = (await this.redis
      .multi()
      .get(this.prefix + key)
      .pttl(this.prefix + key)
      .exec()) as [[null, string | null], [null, number]];
    if (count === null || ttl < 0) return { count: 0, resetMs: 0 };
    return { count: Number(count), resetMs: ttl };
  }

  async ping(): Promise<void> {
    await this.redis.ping();
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}
