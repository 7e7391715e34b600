import request from 'supertest';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import { makeTenant, postIngest } from './factories';
import { storedEventCount } from './factories/events';
import { useTestApp } from './support/test-app';
import { expectProblem } from './support/problem';

/** 1,000 events that are all rejected (a nested payload), about 100 KB to parse and validate. */
const rejectedBatch = (tag: string) => ({
  events: Array.from({ length: 1000 }, (_, i) => ({
    eventName: `Rejected.${tag}`,
    eventId: `${tag}-${i}`,
    payload: { nested: { a: 'x'.repeat(40) } },
  })),
});

describe('ingest CPU budget per key (INGEST_CPU_MS_PER_SECOND)', () => {
  // 1 ms of CPU per second: after one big batch, the key's pause (its cost × 999, at most 1 s) is
  // past the 250 ms drain bound, and so is any batch waiting behind another.
  const t = useTestApp({ INGEST_CPU_MS_PER_SECOND: '1', INGEST_RATE_REQUESTS: '1000' });

  /** Another app's request: for the next second, keys on the instance are contended and shares bind. */
  async function anotherAppIngests(): Promise<void> {
    const other = await makeTenant(t.app);
    const res = await postIngest(t.http, other.liveKey, { events: [{ eventName: 'other.app' }] });
    expect(res.status).toBe(200);
  }

  it('a key whose waiting work is past the drain bound at its share gets 429 rate_limited with Retry-After; rejected events count too', async () => {
    const attacker = await makeTenant(t.app);
    await anotherAppIngests();
    const first = await postIngest(t.http, attacker.liveKey, rejectedBatch('a'));
    expect(first.status).toBe(200);
    expect(first.body).toEqual(expect.objectContaining({ received: 1000, accepted: 0, rejected: 1000 }));

    const over = await postIngest(t.http, attacker.liveKey, { events: [{ eventName: 'valid' }] });
    expectProblem(over, 429, 'rate_limited');
    expect(over.body).toEqual(expect.objectContaining({ limitCpuMsPerSecond: 1 }));
    expect(over.body.detail).toMatch(/CPU/);
    expect(Number(over.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(over.headers['connection']).toBe('close');
    expect(await storedEventCount(t.db, attacker.appId)).toBe(0);
  });

  it('an SDK body whose key is its first member is refused past the share before it is parsed', async () => {
    const attacker = await makeTenant(t.app);
    await anotherAppIngests();
    const spend = await postIngest(t.http, attacker.liveKey, rejectedBatch('sdk'));
    expect(spend.status).toBe(200);
    // Not JSON past the key: parsed, this body would be 400 invalid_json.
    const res = await request(t.http)
      .post('/api/posthog/batch/')
      .set('Content-Type', 'application/json')
      .send(`{"api_key":"${attacker.liveKey}","batch":[{"event":`);
    expectProblem(res, 429, 'rate_limited');
    expect(res.body).toEqual(expect.objectContaining({ limitCpuMsPerSecond: 1 }));
  });

  interface Answer {
    status: number;
    headers: IncomingHttpHeaders;
    body: string;
  }

  /**
   * Sends the headers of a PostHog body of `declared` bytes and only `start` of it, then waits for
   * an answer: a server that reads the rest before answering never gives one.
   */
  async function partialUpload(start: string, declared: number): Promise<Answer> {
    // Supertest listens for each of its requests and closes after; this request does the same.
    const server = t.http.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      return await answerTo(start, declared, (server.address() as AddressInfo).port);
    } finally {
      await new Promise<void>((done) => server.close(() => done()));
    }
  }

  function answerTo(start: string, declared: number, port: number): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const req = httpRequest({
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/api/posthog/batch/',
        headers: { 'content-type': 'application/json', 'content-length': String(declared) },
      });
      const timer = setTimeout(() => {
        req.destroy();
        reject(new Error('no answer before the rest of the body'));
      }, 5000);
      req.on('response', (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => {
          clearTimeout(timer);
          req.destroy();
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
        });
      });
      req.on('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      req.write(start);
    });
  }

  it('an SDK body whose key is its first member is answered from its first bytes: past the share, or a wrong key', async () => {
    const attacker = await makeTenant(t.app);
    await anotherAppIngests();
    const spend = await postIngest(t.http, attacker.liveKey, rejectedBatch('peek'));
    expect(spend.status).toBe(200);
    // 2 KB of a declared 1 MB: the key is in the first bytes, the rest never comes.
    const start = (key: string) =>
      `{"api_key":"${key}","batch":[{"event":"x","properties":{"pad":"${'y'.repeat(2048)}`;
    const over = await partialUpload(start(attacker.liveKey), 1_000_000);
    expect(over.status).toBe(429);
    expect(JSON.parse(over.body)).toEqual(
      expect.objectContaining({ code: 'rate_limited', limitCpuMsPerSecond: 1 }),
    );
    expect(over.headers.connection).toBe('close');
    expect(Number(over.headers['retry-after'])).toBeGreaterThanOrEqual(1);

    const wrong = await partialUpload(start('tly_live_notakey'), 1_000_000);
    expect(wrong.status).toBe(401);
    expect(JSON.parse(wrong.body)).toEqual(expect.objectContaining({ code: 'invalid_key' }));
  });

  it("a key's batches sent together: the first is let in, and the others, waiting behind it past the drain bound, get 429", async () => {
    const attacker = await makeTenant(t.app);
    // Another app keeps sending while the attacker's batches wait their turns (a turn's pause
    // can outlast the contention window of one request).
    await anotherAppIngests();
    let attacking = true;
    const other = (async () => {
      while (attacking) await anotherAppIngests();
    })();
    const answers = await Promise.all(
      ['t1', 't2', 't3'].map((tag) => postIngest(t.http, attacker.liveKey, rejectedBatch(tag))),
    );
    attacking = false;
    await other;
    const served = answers.filter((r) => r.status === 200);
    const refused = answers.filter((r) => r.status !== 200);
    // The first is let in and served; the others would wait behind it for longer than the bound,
    // and are refused at the door, never served.
    expect(served).toHaveLength(1);
    expect(served[0].body).toEqual(expect.objectContaining({ received: 1000, rejected: 1000 }));
    expect(refused).toHaveLength(2);
    for (const r of refused) {
      expectProblem(r, 429, 'rate_limited');
      expect(r.body).toEqual(expect.objectContaining({ limitCpuMsPerSecond: 1 }));
      expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    }
  });

  it('a key alone on the instance is neither refused nor paused: shares bind only while others are active', async () => {
    const alone = await makeTenant(t.app);
    // Past every other app's last request by more than the contention window.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const answers = [];
    for (const tag of ['s1', 's2', 's3'])
      answers.push(await postIngest(t.http, alone.liveKey, rejectedBatch(tag)));
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200]);
    // Another app arrives: the key's share binds again.
    await anotherAppIngests();
    await postIngest(t.http, alone.liveKey, rejectedBatch('s4'));
    expectProblem(await postIngest(t.http, alone.liveKey, rejectedBatch('s5')), 429, 'rate_limited');
  });

  it("another key is not charged for the first key's spending", async () => {
    const attacker = await makeTenant(t.app);
    const victim = await makeTenant(t.app);
    await postIngest(t.http, attacker.liveKey, rejectedBatch('b'));
    expectProblem(await postIngest(t.http, attacker.liveKey, rejectedBatch('c')), 429, 'rate_limited');
    const served = await postIngest(t.http, victim.liveKey, { events: [{ eventName: 'ok' }] });
    expect(served.status).toBe(200);
    expect(served.body).toEqual(expect.objectContaining({ accepted: 1 }));
  });
});

describe('ingest CPU budget at its default', () => {
  const t = useTestApp();

  it('is derived from the core count and leaves ordinary batches alone', async () => {
    expect(t.config.ingestCpuMsPerSecond).toBeGreaterThanOrEqual(100);
    expect(t.config.ingestCpuMsPerSecond).toBeLessThanOrEqual(250);
    const tenant = await makeTenant(t.app);
    for (let i = 0; i < 5; i++) {
      const res = await postIngest(t.http, tenant.liveKey, {
        events: [{ eventName: 'ok', eventId: `d-${i}` }],
      });
      expect(res.status).toBe(200);
    }
  });
});
