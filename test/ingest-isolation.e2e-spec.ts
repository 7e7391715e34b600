import request from 'supertest';
import { makeTenant, postIngest } from './factories';
import { storedEventCount } from './factories/events';
import { waitFor } from './support/harness';
import { startTestApp, TestApp } from './support/test-app';
import { listen, startUpload } from './support/uploads';

type Tenant = Awaited<ReturnType<typeof makeTenant>>;

const post = (t: TestApp, key: string, body: unknown) => postIngest(t.http, key, body);

/** The in-flight budget in use, as /metrics reports it: decoded body bytes held by unanswered requests. */
async function inflightBytes(t: TestApp): Promise<number> {
  const text = (await request(t.http).get('/metrics').expect(200)).text;
  return Number(/^tally_ingest_inflight_bytes (\d+)/m.exec(text)?.[1] ?? NaN);
}

const batch = (tag: string, n: number) => ({
  events: Array.from({ length: n }, (_, i) => ({ eventName: 'load', eventId: `${tag}-${i}` })),
});

/** `n` sequential ingests of a small batch; every one must be a 200. */
async function ingests(t: TestApp, tenant: Tenant, tag: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++)
    expect((await post(t, tenant.liveKey, batch(`${tag}-${i}`, 5))).status).toBe(200);
}

describe('ingest isolation: one key cannot take the in-flight budget from the others', () => {
  let t: TestApp;
  let port: number;

  beforeAll(async () => {
    // Room for four full bodies; by default one key may hold a quarter of that.
    t = await startTestApp({ INGEST_MAX_BYTES: '65536', INGEST_MAX_INFLIGHT_BYTES: '262144' });
    port = await listen(t.http);
  });
  afterAll(() => t.close());

  // Its latency beside the quiet value is a figure of the benchmark (`--noisy-neighbours`), not asserted here.
  it('while one key holds stalled uploads, another app ingests with 200', async () => {
    const attacker = await makeTenant(t.app);
    const victim = await makeTenant(t.app);
    await ingests(t, victim, 'warm', 5);

    // Eight uploads of 60 KB stall just before their end: twice the instance's budget.
    const stalled = Array.from({ length: 8 }, () => startUpload(port, attacker.liveKey, 64_000, 60_000));
    try {
      // The key's share holds one of them; the other seven are refused at once.
      const statuses: number[] = [];
      stalled.forEach((u) => void u.answer.then((a) => statuses.push(a.status)));
      await waitFor(() => statuses.length === 7, { what: 'seven answers' });
      expect(statuses).toEqual([429, 429, 429, 429, 429, 429, 429]);
      // The eighth is held, not answered.
      await waitFor(async () => (await inflightBytes(t)) >= 60_000, { what: 'the held upload' });
      await ingests(t, victim, 'loaded', 20);
    } finally {
      stalled.forEach((u) => u.req.destroy());
    }
  });

  it("a key past its share of the budget gets 429 rate_limited; the instance's other room stays free", async () => {
    const tenant = await makeTenant(t.app);
    const first = startUpload(port, tenant.liveKey, 64_000, 60_000);
    try {
      // The key's share is taken once the server holds the first upload's bytes.
      await waitFor(async () => (await inflightBytes(t)) >= 60_000, { what: 'the first upload to be held' });
      const second = startUpload(port, tenant.liveKey, 64_000, 60_000);
      const answer = await second.answer;
      expect(answer.status).toBe(429);
      expect(answer.headers['retry-after']).toBe('1');
      expect(answer.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(answer.body).toMatchObject({ code: 'rate_limited', status: 429, limitInflightBytes: 65536 });
      second.req.destroy();
      const other = await makeTenant(t.app);
      expect((await post(t, other.liveKey, batch('other', 3))).status).toBe(200);
    } finally {
      first.req.destroy();
    }
  });

  it('refuses a per-key share above the budget, or below one body, at boot', async () => {
    await expect(
      startTestApp({ INGEST_MAX_INFLIGHT_BYTES: '4194304', INGEST_MAX_INFLIGHT_BYTES_PER_KEY: '8388608' }),
    ).rejects.toThrow('INGEST_MAX_INFLIGHT_BYTES_PER_KEY must not exceed INGEST_MAX_INFLIGHT_BYTES');
    await expect(startTestApp({ INGEST_MAX_INFLIGHT_BYTES_PER_KEY: '4096' })).rejects.toThrow(
      'INGEST_MAX_INFLIGHT_BYTES_PER_KEY must be at least INGEST_MAX_BYTES',
    );
  });
});

describe('INGEST_BODY_IDLE_MS and INGEST_BODY_MIN_BYTES_PER_SECOND', () => {
  let t: TestApp;
  let port: number;

  beforeAll(async () => {
    t = await startTestApp({
      INGEST_MAX_BYTES: '4096',
      INGEST_MAX_INFLIGHT_BYTES: '4096',
      INGEST_BODY_IDLE_MS: '400',
      INGEST_BODY_MIN_BYTES_PER_SECOND: '2000',
    });
    port = await listen(t.http);
  });
  afterAll(() => t.close());

  it('answers a stalled body 408 body_timeout, closes the connection and frees its budget', async () => {
    const tenant = await makeTenant(t.app);
    const stalled = startUpload(port, tenant.liveKey, 3500, 3000);
    const answer = await stalled.answer;
    expect(answer.status).toBe(408);
    expect(answer.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(answer.headers.connection).toBe('close');
    expect(answer.body).toMatchObject({ code: 'body_timeout', status: 408, title: 'Request body too slow' });
    expect(answer.body.detail).toMatch(/No body byte arrived for 400 ms/);
    stalled.req.destroy();
    // The whole budget is free again: a body of most of it is accepted.
    await waitFor(async () => (await inflightBytes(t)) === 0, { what: 'the budget to be free' });
    const res = await post(t, tenant.liveKey, batch('after', 60));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ accepted: 60 });
    expect(await storedEventCount(t.db, tenant.appId)).toBe(60);
  });

  it('answers 408 to a body that trickles in below the minimum rate, though never idle', async () => {
    const tenant = await makeTenant(t.app);
    const upload = startUpload(port, tenant.liveKey, 3900, 1000);
    // 50 bytes every 100 ms is 500 bytes/s: a byte arrives well within every idle period.
    const trickle = setInterval(() => upload.req.write('x'.repeat(50)), 100);
    try {
      const answer = await upload.answer;
      expect(answer.status).toBe(408);
      expect(answer.body).toMatchObject({ code: 'body_timeout' });
      expect(answer.body.detail).toMatch(/slower than 2000 bytes\/s/);
    } finally {
      clearInterval(trickle);
      upload.req.destroy();
    }
  });

  it('a body sent at once is unaffected', async () => {
    const tenant = await makeTenant(t.app);
    const res = await post(t, tenant.liveKey, batch('fast', 20));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ received: 20, accepted: 20 });
  });
});
