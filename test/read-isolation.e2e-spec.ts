import request from 'supertest';
import { bearer, makeApiKey, makeTenant, postIngest } from './factories';
import { waitFor } from './support/harness';
import { startTestApp, TestApp } from './support/test-app';
import { expectProblem } from './support/problem';
import { PartitionMaintenanceService } from '@app/storage/partition-maintenance.service';

type Tenant = Awaited<ReturnType<typeof makeTenant>>;

const HEAVY_ROWS = 100_000;

/**
 * Stores HEAVY_ROWS events of the current day for one app in a single statement. Half are
 * named `a`, half carry the session `s`, and no event has both, and every block holds both, so
 * a read for both scans them all whatever the indexes: about 45 ms here, ten times a usual read.
 */
async function seedHeavyApp(t: TestApp, tenant: Tenant): Promise<void> {
  await t.db.query(
    `INSERT INTO events (app_id, ts, received_at, event_name, session_id, is_test_mode)
     SELECT $1, now() - make_interval(secs => g / 1000.0), now() - make_interval(secs => g / 1000.0),
            CASE WHEN g % 2 = 0 THEN 'a' ELSE 'b' END,
            CASE WHEN g % 2 = 1 THEN 's' ELSE 'x' END,
            false
       FROM generate_series(1, $2::int) AS g`,
    [tenant.appId, HEAVY_ROWS],
  );
  // Settle the one-off work such a load starts in the background, so that it does not land in
  // the measured rounds: the lookup summaries of the new ranges, and autovacuum's first pass
  // over the day (VACUUM resets its insert count).
  await t.app.get(PartitionMaintenanceService).summarizeLookups(10_000);
  await t.db.query(`VACUUM (ANALYZE) events`);
}

const heavyRead = (t: TestApp, tenant: Tenant) =>
  request(target(t))
    .get('/api/v1/events')
    .query({ appId: tenant.appId, eventName: 'a', sessionId: 's', limit: 1 })
    .set(bearer(tenant.apiKey));

const lightRead = (t: TestApp, tenant: Tenant) =>
  request(target(t))
    .get('/api/v1/events')
    .query({ appId: tenant.appId, limit: 1 })
    .set(bearer(tenant.apiKey));

/** The server's URL once it listens (one listener for the whole run), else the server. */
function target(t: TestApp): string | TestApp['http'] {
  const address = t.http.address();
  return address && typeof address === 'object' ? `http://127.0.0.1:${address.port}` : t.http;
}

describe('read isolation: a noisy key cannot slow another app down', () => {
  let t: TestApp;
  let noisy: Tenant;
  let quietApp: Tenant;

  beforeAll(async () => {
    // The victim reads back to back, faster than the default read rate: only cost bounds apply here.
    t = await startTestApp({ AUTH_FAILURE_LIMIT: '1000', READ_RATE_REQUESTS: '100000' });
    await new Promise<void>((resolve) => t.http.listen(0, '127.0.0.1', resolve));
    noisy = await makeTenant(t.app);
    quietApp = await makeTenant(t.app);
    await seedHeavyApp(t, noisy);
    const ingest = await postIngest(
      t.http,
      quietApp.liveKey,
      JSON.stringify({ events: [{ eventName: 'one' }, { eventName: 'two' }] }),
    );
    expect(ingest.status).toBe(200);
  }, 60_000);
  afterAll(() => t.close());

  /** `n` sequential light reads of the quiet app; each must be a 200 with one event. */
  async function victimReads(n: number): Promise<void> {
    for (let i = 0; i < n; i++) {
      const res = await lightRead(t, quietApp);
      expect(res.status).toBe(200);
      expect(res.body).toHaveLength(1);
    }
  }

  // The quiet app's latency under this load beside its quiet value (p99 within 3x) is a figure of
  // the benchmark (`--noisy-neighbours`), where the machine's load is accounted for; here only outcomes.
  it("expensive reads by one key are turned away by its read time, while another app's reads answer 200", async () => {
    await victimReads(20);
    const noisyStatuses = new Map<number, number>();
    const noisyLimits = new Set<string>();
    const inFlight: Promise<unknown>[] = [];
    // Open loop at 45 requests/s, within the default read rate of 50/s, as the attack did.
    const fire = setInterval(() => {
      inFlight.push(
        heavyRead(t, noisy).then((res) => {
          noisyStatuses.set(res.status, (noisyStatuses.get(res.status) ?? 0) + 1);
          if (res.status === 429) {
            expectProblem(res, 429, 'rate_limited');
            Object.keys(res.body as object)
              .filter((name) => name.startsWith('limit'))
              .forEach((name) => noisyLimits.add(name));
          }
        }),
      );
    }, 1000 / 45);
    try {
      await waitFor(() => noisyStatuses.get(200), { what: 'a noisy read served' });
      // The victim reads while the noisy key is served, and until it has been turned away.
      await waitFor(
        async () => {
          await victimReads(5);
          return noisyLimits.has('limitReadMsPerSecond');
        },
        { timeoutMs: 60_000, intervalMs: 0, what: 'the noisy key to be refused for its read time' },
      );
    } finally {
      clearInterval(fire);
      await Promise.all(inFlight);
    }
    expect(noisyStatuses.get(200)).toBeGreaterThan(0);
    expect(noisyStatuses.get(429)).toBeGreaterThan(0);
    expect([...noisyStatuses.keys()].sort()).toEqual([200, 429]);
  }, 120_000);

  it('answers a read past READ_MAX_CONCURRENT_PER_KEY with 429 rate_limited, Retry-After and the limit', async () => {
    // A fresh key of the same app: its read time is untouched, only concurrency limits it.
    const fresh = { ...noisy, apiKey: (await makeApiKey(t.app, [noisy.appId])).key };
    const answers = await Promise.all(Array.from({ length: 12 }, () => heavyRead(t, fresh)));
    expect(answers.filter((r) => r.status === 200).length).toBeGreaterThanOrEqual(2);
    const refused = answers.filter((r) => r.status === 429 && 'limitConcurrentReads' in r.body);
    expect(refused.length).toBeGreaterThan(0);
    expectProblem(refused[0], 429, 'rate_limited');
    expect(refused[0].headers['retry-after']).toBe('1');
    expect(refused[0].body).toMatchObject({ limitConcurrentReads: 2 });
  });
});

describe('READ_STATEMENT_TIMEOUT_MS', () => {
  let t: TestApp;
  let tenant: Tenant;

  beforeAll(async () => {
    t = await startTestApp({ READ_STATEMENT_TIMEOUT_MS: '5', AUTH_FAILURE_LIMIT: '1000' });
    tenant = await makeTenant(t.app);
    await seedHeavyApp(t, tenant);
  }, 60_000);
  afterAll(() => t.close());

  it('answers a read that runs past it with 503 query_timeout and Retry-After, never a 500', async () => {
    const res = await heavyRead(t, tenant);
    expectProblem(res, 503, 'query_timeout');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    expect(res.body.detail).toMatch(/Narrow the time range/);
  });

  it('leaves ingest alone: it runs on the primary pool with DATABASE_STATEMENT_TIMEOUT_MS', async () => {
    const events = Array.from({ length: 1000 }, (_, i) => ({ eventName: 'bulk', eventId: `b-${i}` }));
    const res = await postIngest(t.http, tenant.liveKey, JSON.stringify({ events }));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ accepted: 1000 });
    const statement = (await t.db.query(`SHOW statement_timeout`)) as { statement_timeout: string }[];
    expect(statement[0].statement_timeout).toBe('30s');
  });
});
