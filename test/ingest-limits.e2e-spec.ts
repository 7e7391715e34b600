import type { ClientRequest } from 'node:http';
import { makeTenant, postIngest } from './factories';
import { startTestApp, TestApp, useTestApp } from './support/test-app';
import { expectProblem } from './support/problem';
import { listen, startUpload } from './support/uploads';
import { waitFor } from './support/harness';
import { IngestBodyReader } from '@app/ingest/ingest-body.reader';

type Tenant = Awaited<ReturnType<typeof makeTenant>>;

const post = (t: TestApp, key: string, body: unknown) => postIngest(t.http, key, body);

async function stored(t: TestApp, tenant: Tenant) {
  return (await t.db.query(
    `SELECT event_name, anonymous_user_id, payload_json AS payload FROM events WHERE app_id = $1 ORDER BY id`,
    [tenant.appId],
  )) as { event_name: string; anonymous_user_id: string | null; payload: Record<string, unknown> | null }[];
}

const PII_EVENT = {
  eventName: 'Profile.updated',
  anonymousUserId: 'ann@example.com',
  payload: { contact: 'call me on +1 415 555 0123', plan: 'pro' },
};

describe('PII_POLICY', () => {
  describe('reject', () => {
    const t = useTestApp({ PII_POLICY: 'reject' });
    it('rejects an event whose payload holds PII; user ids are still pseudonymised', async () => {
      const tenant = await makeTenant(t.app);
      const res = await post(t, tenant.liveKey, {
        events: [
          PII_EVENT,
          { eventName: 'Clean', anonymousUserId: '+1 415 555 0123', payload: { plan: 'pro' } },
        ],
      });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ received: 2, accepted: 1, rejected: 1, metered: 1 });
      expect(res.body.errors).toEqual([
        { index: 0, field: 'payload.contact', code: 'pii_detected', message: expect.any(String) },
      ]);
      expect(res.body.warnings).toEqual([
        { index: 1, field: 'anonymousUserId', code: 'pii_pseudonymised', message: expect.any(String) },
      ]);
      const rows = await stored(t, tenant);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ event_name: 'Clean', payload: { plan: 'pro' } });
      expect(rows[0].anonymous_user_id).toMatch(/^hmac:[0-9a-f]{64}$/);
    });
  });

  describe('allow', () => {
    const t = useTestApp({ PII_POLICY: 'allow' });
    it('stores payload strings as sent; an email user id is still never stored raw', async () => {
      const tenant = await makeTenant(t.app);
      const res = await post(t, tenant.liveKey, { events: [PII_EVENT] });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ accepted: 1, rejected: 0, errors: [] });
      expect(res.body.warnings).toEqual([
        { index: 0, field: 'anonymousUserId', code: 'pii_pseudonymised', message: expect.any(String) },
      ]);
      const [row] = await stored(t, tenant);
      expect(row.payload).toEqual(PII_EVENT.payload);
      expect(row.anonymous_user_id).toMatch(/^hmac:[0-9a-f]{64}$/);
    });
  });

  describe('redact (the default)', () => {
    const t = useTestApp();
    it('replaces the payload string and keeps the event', async () => {
      const tenant = await makeTenant(t.app);
      const res = await post(t, tenant.liveKey, { events: [PII_EVENT] });
      expect(res.body).toMatchObject({ accepted: 1, rejected: 0, errors: [] });
      expect(res.body.warnings.map((w: { code: string }) => w.code).sort()).toEqual([
        'pii_pseudonymised',
        'pii_redacted',
      ]);
      const [row] = await stored(t, tenant);
      expect(row.payload).toEqual({ contact: '[redacted]', plan: 'pro' });
      expect(row.anonymous_user_id).not.toContain('@');
    });
  });
});

describe('429: per ingest key rate limits', () => {
  const t = useTestApp({ INGEST_RATE_REQUESTS: '3', INGEST_RATE_EVENTS: '10', RATE_WINDOW_MS: '60000' });
  it('the request rate: past INGEST_RATE_REQUESTS, 429 with Retry-After, nothing stored', async () => {
    const tenant = await makeTenant(t.app);
    for (let i = 1; i <= 3; i++) {
      const ok = await post(t, tenant.liveKey, { events: [{ eventName: `ok-${i}` }] });
      expect(ok.status).toBe(200);
      expect(ok.headers['ratelimit-limit']).toBe('3');
      expect(ok.headers['ratelimit-remaining']).toBe(String(3 - i));
    }
    const res = await post(t, tenant.liveKey, { events: [{ eventName: 'too-many' }] });
    expectProblem(res, 429, 'rate_limited');
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect(res.headers['ratelimit-remaining']).toBe('0');
    expect((await stored(t, tenant)).map((r) => r.event_name)).toEqual(['ok-1', 'ok-2', 'ok-3']);
  });

  it('the event rate: past INGEST_RATE_EVENTS, 429 with Retry-After, nothing of that batch stored', async () => {
    const tenant = await makeTenant(t.app);
    const batch = (name: string, n: number) => ({
      events: Array.from({ length: n }, () => ({ eventName: name })),
    });
    expect((await post(t, tenant.liveKey, batch('first', 6))).status).toBe(200);
    const res = await post(t, tenant.liveKey, batch('second', 6));
    expectProblem(res, 429, 'rate_limited');
    expect(res.body).toMatchObject({ limitEvents: 10, windowMs: 60000 });
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(60);
    const rows = await stored(t, tenant);
    expect(rows).toHaveLength(6);
    expect(rows.every((r) => r.event_name === 'first')).toBe(true);
  });

  it('limits each key separately', async () => {
    const a = await makeTenant(t.app);
    const b = await makeTenant(t.app);
    const full = { events: Array.from({ length: 10 }, () => ({ eventName: 'x' })) };
    expect((await post(t, a.liveKey, full)).status).toBe(200);
    expect((await post(t, b.liveKey, full)).status).toBe(200);
    expect(await stored(t, a)).toHaveLength(10);
    expect(await stored(t, b)).toHaveLength(10);
  });

  it('a batch larger than the event rate could never pass: 413, so the client splits instead of retrying', async () => {
    const tenant = await makeTenant(t.app);
    const res = await post(t, tenant.liveKey, {
      events: Array.from({ length: 11 }, () => ({ eventName: 'x' })),
    });
    expectProblem(res, 413, 'payload_too_large');
    expect(res.body).toMatchObject({ limitEvents: 10, receivedEvents: 11 });
    expect(await stored(t, tenant)).toHaveLength(0);
  });
});

describe('503: the database cannot serve', () => {
  const t = useTestApp({ DATABASE_STATEMENT_TIMEOUT_MS: '300' });
  it('a write that times out is 503 with Retry-After and stores nothing', async () => {
    const tenant = await makeTenant(t.app);
    expect((await post(t, tenant.liveKey, { events: [{ eventName: 'seed', eventId: 'held' }] })).status).toBe(
      200,
    );

    // Hold the dedup row of "held" from another connection: the batch's claim on it waits until
    // the statement timeout cancels the whole insert.
    const holder = t.db.createQueryRunner();
    await holder.connect();
    await holder.startTransaction();
    try {
      await holder.query(`SELECT 1 FROM event_dedup WHERE app_id = $1 AND event_id = 'held' FOR UPDATE`, [
        tenant.appId,
      ]);
      const res = await post(t, tenant.liveKey, {
        events: [
          { eventName: 'fresh', eventId: 'new-1' },
          { eventName: 'again', eventId: 'held' },
          { eventName: 'no-id' },
        ],
      });
      expectProblem(res, 503, 'service_unavailable');
      expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(JSON.stringify(res.body)).not.toMatch(/statement|event_dedup|SELECT|INSERT/i);
    } finally {
      await holder.rollbackTransaction();
      await holder.release();
    }

    const rows = await stored(t, tenant);
    expect(rows.map((r) => r.event_name)).toEqual(['seed']);
    const dedup = (await t.db.query(`SELECT event_id FROM event_dedup WHERE app_id = $1 ORDER BY 1`, [
      tenant.appId,
    ])) as { event_id: string }[];
    expect(dedup.map((r) => r.event_id)).toEqual(['held']);

    // The retry succeeds once the database serves again.
    const retry = await post(t, tenant.liveKey, {
      events: [
        { eventName: 'fresh', eventId: 'new-1' },
        { eventName: 'again', eventId: 'held' },
        { eventName: 'no-id' },
      ],
    });
    expect(retry.body).toMatchObject({ received: 3, accepted: 2, duplicates: 1 });
    expect((await stored(t, tenant)).map((r) => r.event_name)).toEqual(['seed', 'fresh', 'no-id']);
  });
});

describe('INGEST_MAX_INFLIGHT_BYTES', () => {
  const t = useTestApp({ INGEST_MAX_BYTES: '4096', INGEST_MAX_INFLIGHT_BYTES: '4096' });
  let port: number;

  beforeAll(async () => {
    port = await listen(t.http);
  });

  /** A request that sends `sent` of `declared` body bytes and then waits, holding them. */
  async function holdOpen(key: string, declared: number, sent: number): Promise<ClientRequest> {
    const { req } = startUpload(port, key, declared, sent);
    // Until the server has authenticated the request and read what was sent.
    await waitFor(() => t.app.get(IngestBodyReader).inFlightBytes >= sent, { what: 'the held bytes' });
    return req;
  }

  const batch = (n: number) => ({
    events: Array.from({ length: n }, (_, i) => ({ eventName: 'load', eventId: `l-${i}` })),
  });

  it('answers 503 with Retry-After, storing nothing, while other bodies hold the budget; then recovers', async () => {
    const tenant = await makeTenant(t.app);
    const held = await holdOpen(tenant.liveKey, 3500, 3000);
    const body = batch(30);
    expect(JSON.stringify(body).length).toBeGreaterThan(1100);
    const refused = await post(t, tenant.liveKey, body);
    expectProblem(refused, 503, 'service_unavailable');
    expect(refused.headers['retry-after']).toBe('1');
    expect(refused.body.detail).toMatch(/ingest bodies/);
    expect(await stored(t, tenant)).toEqual([]);

    // The held request ends (here: its client goes away), and its bytes are given back.
    held.destroy();
    await waitFor(() => t.app.get(IngestBodyReader).inFlightBytes === 0, { what: 'the bytes given back' });
    const accepted = await post(t, tenant.liveKey, body);
    expect(accepted.status).toBe(200);
    expect(accepted.body).toMatchObject({ received: 30, accepted: 30 });
  });

  it('answered requests give their bytes back: many bodies in a row fit a budget of one', async () => {
    const tenant = await makeTenant(t.app);
    for (let i = 0; i < 5; i++) {
      const res = await post(t, tenant.liveKey, {
        events: [{ eventName: 'seq', eventId: `seq-${i}` }, ...batch(40).events],
      });
      expect(res.status).toBe(200);
    }
    expect((await stored(t, tenant)).filter((r) => r.event_name === 'seq')).toHaveLength(5);
  });

  it('refuses a budget smaller than INGEST_MAX_BYTES at boot', async () => {
    await expect(
      startTestApp({ INGEST_MAX_BYTES: '8192', INGEST_MAX_INFLIGHT_BYTES: '4096' }),
    ).rejects.toThrow(
      'Invalid configuration: INGEST_MAX_INFLIGHT_BYTES must be at least INGEST_MAX_BYTES (8192), got 4096',
    );
  });
});
