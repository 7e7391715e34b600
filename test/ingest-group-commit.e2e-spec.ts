import request from 'supertest';
import { bearer, makeTenant } from './factories';
import { startTestApp, useTestApp } from './support/test-app';
import { IngestWriter } from '@app/ingest/ingest-writer';
import type { AcceptedEvent } from '@app/ingest/ingest.types';
import { MetricsService } from '@app/common/metrics/metrics.service';

type Tenant = Awaited<ReturnType<typeof makeTenant>>;

/** A stored-ready event, as the validator would hand it to the writer. */
function accepted(eventName: string, eventId: string | null, index = 0): AcceptedEvent {
  const now = Date.now();
  return {
    index,
    eventId,
    eventName,
    anonymousUserId: 'u1',
    sessionId: null,
    eventTime: now,
    ts: now,
    isTestMode: false,
    platform: null,
    appVersion: null,
    buildNumber: null,
    osVersion: null,
    deviceModel: null,
    locale: null,
    timezone: null,
    floatValue: null,
    payload: { k: 'v' },
  };
}

/** The sum and count of a histogram in the Prometheus text output. */
async function histogram(metrics: MetricsService, name: string): Promise<{ sum: number; count: number }> {
  const text = await metrics.render();
  const read = (suffix: string) =>
    Number(new RegExp(`^${name}_${suffix} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  return { sum: read('sum'), count: read('count') };
}

// One statement at a time, so that batches arriving while it runs are grouped into the next one.
describe('ingest group commit (INGEST_WRITE_CONCURRENCY=1)', () => {
  const t = useTestApp({ INGEST_WRITE_CONCURRENCY: '1', INGEST_WRITE_MAX_EVENTS: '1000' });
  let writer: IngestWriter;

  beforeAll(async () => {
    writer = t.app.get(IngestWriter);
  });

  const stored = async (tenant: Tenant) =>
    (await t.db.query(`SELECT event_name, event_id FROM events WHERE app_id = $1 ORDER BY event_name`, [
      tenant.appId,
    ])) as { event_name: string; event_id: string | null }[];

  it('writes batches that queue behind a running statement together, one transaction for several requests', async () => {
    const tenant = await makeTenant(t.app);
    const metrics = t.app.get(MetricsService);
    const before = await histogram(metrics, 'tally_ingest_write_batches');
    const receivedAt = Date.now();
    // The first starts at once; the next four wait for it and then go as one statement.
    const results = await Promise.all(
      [0, 1, 2, 3, 4].map((b) =>
        writer.write({ appId: tenant.appId, receivedAt, events: [accepted(`g${b}`, `g-${b}`)] }),
      ),
    );
    expect(results).toEqual([[], [], [], [], []]);
    const after = await histogram(metrics, 'tally_ingest_write_batches');
    expect(after.count - before.count).toBe(2);
    expect(after.sum - before.sum).toBe(5);
    expect((await stored(tenant)).map((r) => r.event_name)).toEqual(['g0', 'g1', 'g2', 'g3', 'g4']);
  });

  it('an eventId shared by two grouped requests is stored once, for the first; the second gets a duplicate', async () => {
    const tenant = await makeTenant(t.app);
    const other = await makeTenant(t.app);
    const receivedAt = Date.now();
    const results = await Promise.all([
      writer.write({ appId: tenant.appId, receivedAt, events: [accepted('lead', 'lead-1')] }),
      writer.write({
        appId: tenant.appId,
        receivedAt,
        events: [accepted('first', 'shared-1', 0), accepted('mine', 'own-1', 1)],
      }),
      writer.write({
        appId: tenant.appId,
        receivedAt,
        events: [accepted('own', 'own-2', 0), accepted('second', 'shared-1', 1)],
      }),
      // The same eventId in another app is another event.
      writer.write({ appId: other.appId, receivedAt, events: [accepted('other', 'shared-1')] }),
    ]);
    expect(results).toEqual([[], [], [1], []]);
    expect(await stored(tenant)).toEqual([
      { event_name: 'first', event_id: 'shared-1' },
      { event_name: 'lead', event_id: 'lead-1' },
      { event_name: 'mine', event_id: 'own-1' },
      { event_name: 'own', event_id: 'own-2' },
    ]);
    expect(await stored(other)).toEqual([{ event_name: 'other', event_id: 'shared-1' }]);
  });

  it('a batch the database refuses fails alone; the batches grouped with it are stored', async () => {
    const tenant = await makeTenant(t.app);
    const receivedAt = Date.now();
    // A NUL character cannot be stored in a text column (the validator never lets one through).
    const outcomes = await Promise.allSettled([
      writer.write({ appId: tenant.appId, receivedAt, events: [accepted('lead', 'p-0')] }),
      writer.write({ appId: tenant.appId, receivedAt, events: [accepted('good-1', 'p-1')] }),
      writer.write({ appId: tenant.appId, receivedAt, events: [accepted('bad\u0000name', 'p-2')] }),
      writer.write({ appId: tenant.appId, receivedAt, events: [accepted('good-2', 'p-3')] }),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    expect((outcomes[2] as PromiseRejectedResult).reason).toMatchObject({ code: '22021' });
    expect((await stored(tenant)).map((r) => r.event_name)).toEqual(['good-1', 'good-2', 'lead']);
    const dedup = (await t.db.query(`SELECT event_id FROM event_dedup WHERE app_id = $1 ORDER BY 1`, [
      tenant.appId,
    ])) as { event_id: string }[];
    expect(dedup.map((r) => r.event_id)).toEqual(['p-0', 'p-1', 'p-3']);
  });

  it('concurrent HTTP requests sharing eventIds are answered per request and store each id once', async () => {
    const tenant = await makeTenant(t.app);
    const shared = Array.from({ length: 10 }, (_, i) => ({ eventName: 's', eventId: `s-${i}` }));
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, r) =>
        request(t.http)
          .post('/api/ingest')
          .set(bearer(tenant.liveKey))
          .send({ events: [...shared, { eventName: 'own', eventId: `own-${r}` }] }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(8).fill(200));
    for (const r of results) {
      expect(r.body.received).toBe(11);
      expect(r.body.accepted + r.body.duplicates).toBe(11);
      expect(r.body.metered).toBe(r.body.accepted);
    }
    expect(results.reduce((n, r) => n + r.body.accepted, 0)).toBe(18);
    expect(results.reduce((n, r) => n + r.body.duplicates, 0)).toBe(70);
    const rows = await stored(tenant);
    expect(rows).toHaveLength(18);
    expect(new Set(rows.map((r) => r.event_id)).size).toBe(18);
  });
});

describe('ingest write settings', () => {
  it('refuses INGEST_WRITE_CONCURRENCY above DATABASE_POOL_SIZE at boot', async () => {
    await expect(startTestApp({ DATABASE_POOL_SIZE: '2', INGEST_WRITE_CONCURRENCY: '3' })).rejects.toThrow(
      'Invalid configuration: INGEST_WRITE_CONCURRENCY must not exceed DATABASE_POOL_SIZE (2), got 3',
    );
  });
});
