import { Client } from 'pg';
import request from 'supertest';
import { KeysService } from '@app/auth/keys.service';
import { KEY_REVOKED_CHANNEL } from '@app/auth/key.repository';
import { TEST_ACTOR, bearer, makeTenant } from './factories';
import { waitFor } from './support/harness';
import { startTestApp, testDatabaseUrl, TestApp } from './support/test-app';
import { expectProblem } from './support/problem';

// The longest cache TTL there is: a 401 well before it ends can only come from the notification.
const TTL_MS = 30_000;
const ENV = { KEY_CACHE_TTL_MS: String(TTL_MS), AUTH_FAILURE_LIMIT: '1000' };

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

  /**
   * Reads until the key gets 401 on `t`. The deadline is half the cache TTL: a cached key only
   * expires at the TTL, so a refusal before it is the notification's doing, however busy the machine.
   */
  async function refused(t: TestApp, appId: string, key: string): Promise<void> {
    const res = await waitFor(
      async () => {
        const res = await read(t, appId, key);
        if (res.status !== 401) expect(res.status).toBe(200);
        return res.status === 401 ? res : undefined;
      },
      { timeoutMs: TTL_MS / 2, what: 'the revoked key to be refused' },
    );
    expectProblem(res, 401, 'invalid_key');
  }

  /** Listens on the channel the instances LISTEN to; `next` resolves with the next notification's key id. */
  async function listenForRevocation(): Promise<{
    next: Promise<string | undefined>;
    close: () => Promise<void>;
  }> {
    const listener = new Client({ connectionString: testDatabaseUrl() });
    await listener.connect();
    await listener.query(`LISTEN ${KEY_REVOKED_CHANNEL}`);
    const next = new Promise<string | undefined>((resolve) =>
      listener.once('notification', (n) => resolve(n.payload)),
    );
    return { next, close: () => listener.end() };
  }

  async function listeners(): Promise<number[]> {
    const rows = (await a.db.query(
      `SELECT pid FROM pg_stat_activity WHERE application_name = 'tally-listen' AND datname = current_database()`,
    )) as { pid: number }[];
    return rows.map((r) => r.pid);
  }

  async function revokeOnBoth(): Promise<void> {
    const tenant = await makeTenant(a.app);
    // Both instances have the key cached.
    expect((await read(a, tenant.appId, tenant.apiKey)).status).toBe(200);
    expect((await read(b, tenant.appId, tenant.apiKey)).status).toBe(200);
    const notification = await listenForRevocation();
    try {
      // The service call the CLI's `keys revoke` makes, on instance a.
      await a.app.get(KeysService).revoke(tenant.apiKeyId, TEST_ACTOR);
      expect(await notification.next).toBe(tenant.apiKeyId);
    } finally {
      await notification.close();
    }
    await Promise.all([refused(a, tenant.appId, tenant.apiKey), refused(b, tenant.appId, tenant.apiKey)]);
  }

  it('a revoked key gets 401 on both instances long before the cache TTL ends', async () => {
    await revokeOnBoth();
  });

  it('the listener reconnects when its connection drops, and revocation reaches both again', async () => {
    const before = await listeners();
    expect(before).toHaveLength(2);
    await a.db.query(`SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid`, [before]);
    await waitFor(async () => (await listeners()).filter((pid) => !before.includes(pid)).length === 2, {
      timeoutMs: 10_000,
      what: 'both listeners to reconnect',
    });
    await revokeOnBoth();
  });
});
