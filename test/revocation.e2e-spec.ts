import request from 'supertest';
import { KeysService } from '@app/auth/keys.service';
import { TEST_ACTOR, bearer, makeTenant } from './factories';
import { startTestApp, TestApp } from './support/test-app';
import { expectProblem } from './support/problem';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// A long cache TTL, so that only the notification can explain a quick 401.
const ENV = { KEY_CACHE_TTL_MS: '30000', AUTH_FAILURE_LIMIT: '1000' };

describe('revocation reaches every instance at once (LISTEN/NOTIFY)', () => {
  let a: TestApp;
  let b: TestApp;
  beforeAll(async () => {
    a = await startTestApp(ENV);
    b = await startTestApp(ENV);
  });
  afterAll(async () => {
    await a.close();
    await b.close();
  });

  const read = (t: TestApp, appId: string, key: string) =>
    request(t.http).get('/api/v1/events').query({ appId, limit: 1 }).set(bearer(key));

  /** Polls until the key gets 401 on `t`; returns the milliseconds it took, or fails after 1 s. */
  async function refusedWithin1s(t: TestApp, appId: string, key: string, since: number): Promise<number> {
    for (;;) {
      const res = await read(t, appId, key);
      if (res.status === 401) {
        expectProblem(res, 401, 'invalid_key');
        return Date.now() - since;
      }
      expect(res.status).toBe(200);
      if (Date.now() - since > 1000) throw new Error('the revoked key still works after 1 s');
      await sleep(20);
    }
  }

  async function listeners(): Promise<number[]> {
    const rows = (await a.db.query(
      `SELECT pid FROM pg_stat_activity WHERE application_name = 'tally-listen'`,
    )) as { pid: number }[];
    return rows.map((r) => r.pid);
  }

  async function revokeOnBothWithin1s(): Promise<void> {
    const tenant = await makeTenant(a.app);
    // Both instances have the key cached.
    expect((await read(a, tenant.appId, tenant.apiKey)).status).toBe(200);
    expect((await read(b, tenant.appId, tenant.apiKey)).status).toBe(200);
    const since = Date.now();
    // The service call the CLI's `keys revoke` makes, on instance a.
    await a.app.get(KeysService).revoke(tenant.apiKeyId, TEST_ACTOR);
    const [onA, onB] = await Promise.all([
      refusedWithin1s(a, tenant.appId, tenant.apiKey, since),
      refusedWithin1s(b, tenant.appId, tenant.apiKey, since),
    ]);
    expect(onA).toBeLessThanOrEqual(1000);
    expect(onB).toBeLessThanOrEqual(1000);
  }

  it('a revoked key gets 401 on both instances within 1 s, well inside the cache TTL', async () => {
    await revokeOnBothWithin1s();
  });

  it('the listener reconnects when its connection drops, and revocation is instant again', async () => {
    const before = await listeners();
    expect(before).toHaveLength(2);
    await a.db.query(`SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid`, [before]);
    const deadline = Date.now() + 10_000;
    while ((await listeners()).filter((pid) => !before.includes(pid)).length < 2) {
      if (Date.now() > deadline) throw new Error('the listeners did not reconnect');
      await sleep(50);
    }
    await revokeOnBothWithin1s();
  });
});
