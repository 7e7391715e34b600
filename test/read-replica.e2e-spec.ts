import request from 'supertest';
import { randomUUID } from 'node:crypto';
import { ReadDatabase } from '@app/database/read-database';
import { bearer, makeTenant, postIngest } from './factories';
import { sample, waitFor } from './support/harness';
import { startTestApp, testReplicaUrl, TestApp } from './support/test-app';
import { Contract } from './support/contract';

// The real standby (replay paused, stopped, restarted) is exercised by test/reliability/replica.mjs
// (npm run test:replica). Here the "replica" is the test database under another URL, or a port
// where nothing listens: enough for the routing, the retry, readiness and the metrics.

/** Polls `probe` until it returns true (the routing checks once a second); fails after 15 s. */
async function until(what: string, probe: () => Promise<boolean>): Promise<void> {
  await waitFor(probe, { timeoutMs: 15_000, intervalMs: 50, what });
}

async function metrics(t: TestApp): Promise<string> {
  return (await request(t.http).get('/metrics').expect(200)).text;
}

function routeIs(t: TestApp, target: 'replica' | 'primary') {
  return async () => sample(await metrics(t), 'tally_read_route', { target }) === 1;
}

async function ingestOne(t: TestApp, key: string): Promise<string> {
  const eventId = `replica-${randomUUID()}`;
  await postIngest(t.http, key, { events: [{ eventName: 'Replica.read', eventId }] }).expect(200);
  return eventId;
}

/**
 * GET /readyz answers 200, as documented, with `status`, the primary up and the read database's
 * check as `databaseRead`; returns the answer.
 */
async function expectReady(t: TestApp, status: string, databaseRead: Record<string, unknown>) {
  const res = await request(t.http).get('/readyz');
  expect(res.status).toBe(200);
  expect(res.body).toEqual({
    status,
    checks: { shutdown: { status: 'up' }, database: { status: 'up' }, database_read: databaseRead },
  });
  new Contract(t.app).expect(res, 'get', '/readyz');
  return res;
}

/** GET /api/v1/events of the tenant's app: asserts a 200 and returns the eventIds, newest first. */
async function readEventIds(t: TestApp, tenant: { appId: string; apiKey: string }): Promise<string[]> {
  const res = await request(t.http)
    .get('/api/v1/events')
    .query({ appId: tenant.appId })
    .set(bearer(tenant.apiKey));
  expect(res.status).toBe(200);
  return res.body.map((e: { eventId: string }) => e.eventId);
}

describe('reads on a replica', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ DATABASE_READ_URL: testReplicaUrl() });
  });
  afterAll(async () => {
    await t.close();
  });

  it('serves event and rollup reads from the replica once its first check is healthy, with no switch', async () => {
    await until('reads on the replica', routeIs(t, 'replica'));
    const tenant = await makeTenant(t.app);
    const eventId = await ingestOne(t, tenant.liveKey);
    expect(await readEventIds(t, tenant)).toEqual([eventId]);
    const rollups = await request(t.http)
      .get('/api/v1/rollups')
      .query({ appId: tenant.appId })
      .set(bearer(tenant.apiKey));
    expect(rollups.status).toBe(200);
    const text = await metrics(t);
    expect(sample(text, 'tally_read_route', { target: 'primary' })).toBe(0);
    expect(sample(text, 'tally_read_replica_lag_seconds')).toBe(0);
    expect(sample(text, 'tally_read_route_switches_total', { to: 'replica' })).toBe(0);
    expect(sample(text, 'tally_read_route_switches_total', { to: 'primary' })).toBe(0);
    expect(sample(text, 'tally_db_pool_connections', { pool: 'replica' })).toBeGreaterThan(0);
  });

  it('reports the replica in /readyz', async () => {
    await until('reads on the replica', routeIs(t, 'replica'));
    await expectReady(t, 'ok', { status: 'up', target: 'replica', lagSeconds: 0 });
  });

  it('retries a read on the primary when the replica connection fails, and moves reads there', async () => {
    await until('reads on the replica', routeIs(t, 'replica'));
    const tenant = await makeTenant(t.app);
    const eventId = await ingestOne(t, tenant.liveKey);
    const before = sample(await metrics(t), 'tally_read_route_switches_total', { to: 'primary' }) ?? 0;
    // The replica's pool goes away under the service, as when the standby stops.
    await t.app.get(ReadDatabase).replicaDataSource()!.destroy();
    expect(await readEventIds(t, tenant)).toEqual([eventId]);
    const text = await metrics(t);
    expect(sample(text, 'tally_read_route', { target: 'primary' })).toBe(1);
    expect(sample(text, 'tally_read_route_switches_total', { to: 'primary' })).toBe(before + 1);
    // A healthy replica gets the reads back after READ_RETURN_CHECKS checks.
    await until('reads back on the replica', routeIs(t, 'replica'));
  });
});

describe('reads when the replica is unreachable', () => {
  let t: TestApp;
  beforeAll(async () => {
    // Port 1: nothing listens there.
    t = await startTestApp({ DATABASE_READ_URL: 'postgres://tally:tally@127.0.0.1:1/tally' });
  });
  afterAll(async () => {
    await t.close();
  });

  it('serves reads from the primary and stays ready, reporting the replica as degraded', async () => {
    const tenant = await makeTenant(t.app);
    const eventId = await ingestOne(t, tenant.liveKey);
    expect(await readEventIds(t, tenant)).toEqual([eventId]);

    await until(
      'a failed replica check',
      async () => (await request(t.http).get('/readyz')).body.status === 'degraded',
    );
    const ready = await expectReady(t, 'degraded', {
      status: 'degraded',
      target: 'primary',
      lagSeconds: null,
    });
    // Failure messages (hosts, ports) stay in the log.
    expect(JSON.stringify(ready.body)).not.toContain('127.0.0.1');
    const text = await metrics(t);
    expect(sample(text, 'tally_read_route', { target: 'primary' })).toBe(1);
    expect(sample(text, 'tally_read_route', { target: 'replica' })).toBe(0);
    expect(sample(text, 'tally_read_route_switches_total', { to: 'replica' })).toBe(0);
    expect(sample(text, 'tally_read_route_switches_total', { to: 'primary' })).toBe(1);
    expect(sample(text, 'tally_read_replica_lag_seconds')).toBeNaN();
  });
});

describe('reads without a replica', () => {
  it('registers no replica metrics and reports no database_read check', async () => {
    const t = await startTestApp();
    try {
      const text = await metrics(t);
      expect(sample(text, 'tally_read_route', { target: 'primary' })).toBeUndefined();
      expect((await request(t.http).get('/readyz')).body.checks.database_read).toBeUndefined();
    } finally {
      await t.close();
    }
  });
});
