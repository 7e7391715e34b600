import { Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import request from 'supertest';
import { RedisRateLimitStore } from '@app/common/rate-limit/redis-rate-limit.store';
import { RateLimitStore } from '@app/common/rate-limit/rate-limit.store';
import { bearer, makeTenant } from './factories';
import { waitFor } from './support/harness';
import { startTestApp, TestApp } from './support/test-app';

// The local Redis of this machine (and of CI). Every run uses its own key prefix and removes
// its keys afterwards, so runs never see each other's counters.
const REDIS_URL = 'redis://127.0.0.1:6379';
const UNREACHABLE_REDIS_URL = 'redis://127.0.0.1:1';
const prefix = `tally-test-${randomUUID().slice(0, 8)}:`;

async function deleteKeys(redis: Redis, pattern: string): Promise<void> {
  const stream = redis.scanStream({ match: pattern, count: 500 });
  for await (const keys of stream as AsyncIterable<string[]>) if (keys.length) await redis.del(...keys);
}

describe('Redis rate-limit store', () => {
  let admin: Redis;
  const stores: RedisRateLimitStore[] = [];
  const store = async (url = REDIS_URL) => {
    const s = new RedisRateLimitStore(url, `${prefix}rl:`);
    stores.push(s);
    expect(await s.waitForConnection(url === REDIS_URL ? 5000 : 200)).toBe(url === REDIS_URL);
    return s;
  };

  beforeAll(() => {
    admin = new Redis(REDIS_URL);
  });
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await deleteKeys(admin, `${prefix}*`);
    await admin.quit();
  });

  it('shares one counter between two stores (two instances), atomically', async () => {
    const a = await store();
    const b = await store();
    await a.ping();
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).hit('shared', 1, 60_000)),
    );
    // Each hit saw a distinct count: no increment was lost between the two clients.
    expect(results.map((r) => r.count).sort((x, y) => x - y)).toEqual(
      Array.from({ length: 20 }, (_, i) => i + 1),
    );
    expect(await a.peek('shared')).toEqual({ count: 20, resetMs: expect.any(Number) });
    expect(await b.hit('shared', 5, 60_000)).toEqual({ count: 25, resetMs: expect.any(Number) });
    expect(Number(await admin.get(`${prefix}rl:shared`))).toBe(25);
  });

  it('starts the window on the first hit and does not extend it on later ones', async () => {
    const s = await store();
    const first = await s.hit('window', 1, 60_000);
    expect(first.resetMs).toBeGreaterThan(59_000);
    expect(first.resetMs).toBeLessThanOrEqual(60_000);
    const pttlAfterFirst = await admin.pttl(`${prefix}rl:window`);
    // Once Redis's clock has moved on, a later hit that restarted the window would show as a longer TTL.
    await waitFor(async () => (await admin.pttl(`${prefix}rl:window`)) < pttlAfterFirst, {
      what: 'the TTL to fall',
    });
    const before = await admin.pttl(`${prefix}rl:window`);
    await s.hit('window', 1, 60_000);
    expect(await admin.pttl(`${prefix}rl:window`)).toBeLessThanOrEqual(before);
  });

  it('resets the counter when the window ends', async () => {
    const s = await store();
    expect((await s.hit('short', 3, 150)).count).toBe(3);
    expect(await admin.get(`${prefix}rl:short`)).toBe('3');
    await waitFor(async () => (await admin.exists(`${prefix}rl:short`)) === 0, { what: 'the window to end' });
    expect(await s.peek('short')).toEqual({ count: 0, resetMs: 0 });
    expect((await s.hit('short', 1, 150)).count).toBe(1);
  });

  it('peek does not count', async () => {
    const s = await store();
    expect(await s.peek('untouched')).toEqual({ count: 0, resetMs: 0 });
    await s.hit('untouched', 2, 60_000);
    await s.peek('untouched');
    expect((await s.peek('untouched')).count).toBe(2);
    expect(await admin.get(`${prefix}rl:untouched`)).toBe('2');
  });

  it('keeps counting in memory when Redis is unreachable, warns, and its ping fails', async () => {
    // The store's warning goes to the test's own spy rather than into the test output.
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const s = await store(UNREACHABLE_REDIS_URL);
    expect((await s.hit('offline', 1, 60_000)).count).toBe(1);
    expect(warn).toHaveBeenCalledWith(expect.stringContaining('Redis unavailable, counting in memory'));
    warn.mockRestore();
    expect((await s.hit('offline', 1, 60_000)).count).toBe(2);
    expect((await s.peek('offline')).count).toBe(2);
    expect(await admin.exists(`${prefix}rl:offline`)).toBe(0);
    await expect(s.ping(500)).rejects.toThrow(/enableOfflineQueue|no PING answer/);
  });
});

describe('rate limits across two app instances sharing Redis', () => {
  let one: TestApp;
  let two: TestApp;
  let admin: Redis;
  const env = {
    REDIS_URL,
    REDIS_KEY_PREFIX: prefix,
    READ_RATE_REQUESTS: '4',
    RATE_WINDOW_MS: '60000',
    AUTH_FAILURE_LIMIT: '1000',
  };

  beforeAll(async () => {
    admin = new Redis(REDIS_URL);
    one = await startTestApp(env);
    two = await startTestApp(env);
  });
  afterAll(async () => {
    await one.close();
    await two.close();
    await deleteKeys(admin, `${prefix}*`);
    await admin.quit();
  });

  it('uses the Redis store when REDIS_URL is set', () => {
    expect(one.app.get(RateLimitStore)).toBeInstanceOf(RedisRateLimitStore);
  });

  it('enforces one per-key read limit over both instances together', async () => {
    const tenant = await makeTenant(one.app);
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      const res = await request((i % 2 ? two : one).http)
        .get('/api/v1/events')
        .query({ appId: tenant.appId })
        .set(bearer(tenant.apiKey));
      statuses.push(res.status);
      if (res.status === 429) {
        expect(res.body.code).toBe('rate_limited');
        expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
      }
      expect(res.headers['ratelimit-limit']).toBe('4');
    }
    expect(statuses).toEqual([200, 200, 200, 200, 429, 429, 429, 429]);
  });

  it('reports Redis in readiness', async () => {
    const res = await request(one.http).get('/readyz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      status: 'ok',
      checks: { shutdown: { status: 'up' }, database: { status: 'up' }, redis: { status: 'up' } },
    });
  });
});

describe('readiness with Redis unreachable', () => {
  it('is degraded, not failed: limits fall back to per-instance counters and reads keep working', async () => {
    const t = await startTestApp({ REDIS_URL: UNREACHABLE_REDIS_URL, AUTH_FAILURE_LIMIT: '1000' });
    try {
      const res = await request(t.http).get('/readyz');
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        status: 'degraded',
        checks: { shutdown: { status: 'up' }, database: { status: 'up' }, redis: { status: 'degraded' } },
      });
      const tenant = await makeTenant(t.app);
      const read = await request(t.http)
        .get('/api/v1/events')
        .query({ appId: tenant.appId })
        .set(bearer(tenant.apiKey));
      expect(read.status).toBe(200);
      expect(read.headers['ratelimit-remaining']).toBe(String(t.config.readRateRequests - 1));
    } finally {
      await t.close();
    }
  });
});
