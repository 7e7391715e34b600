import request from 'supertest';
import { createGzip, gzipSync } from 'node:zlib';
import { bearer, makeTenant } from './factories';
import { storedEventCount } from './factories/events';
import { useTestApp } from './support/test-app';
import { expectProblem } from './support/problem';

type Tenant = Awaited<ReturnType<typeof makeTenant>>;

const LIMIT = 1_048_576;

/** gzip of `total` bytes of zeros, made in 1 MiB steps so the test never holds the plain data. */
async function gzipBomb(total: number): Promise<Buffer> {
  const gzip = createGzip({ level: 9 });
  const out: Buffer[] = [];
  gzip.on('data', (c: Buffer) => out.push(c));
  const done = new Promise((resolve) => gzip.on('end', resolve));
  const zeros = Buffer.alloc(LIMIT);
  for (let written = 0; written < total; written += zeros.length) {
    if (!gzip.write(zeros)) await new Promise((resolve) => gzip.once('drain', resolve));
  }
  gzip.end();
  await done;
  return Buffer.concat(out);
}

describe('POST /api/ingest with Content-Encoding: gzip', () => {
  const t = useTestApp({ AUTH_FAILURE_LIMIT: '1000' });

  const postGzip = (tenant: Tenant, body: Buffer, encoding = 'gzip') => {
    const req = request(t.http)
      .post('/api/ingest')
      .set(bearer(tenant.liveKey))
      .set('Content-Type', 'application/json')
      .set('Content-Encoding', encoding);
    req.write(body);
    return req;
  };
  const storedCount = (tenant: Tenant) => storedEventCount(t.db, tenant.appId);

  it.each(['gzip', 'x-gzip', 'GZIP'])(
    'accepts a %s batch; payloadBytes is the decoded size',
    async (encoding) => {
      const tenant = await makeTenant(t.app);
      const json = JSON.stringify({
        events: Array.from({ length: 100 }, (_, i) => ({
          eventName: 'Gz.event',
          eventId: `gz-${i}`,
          payload: { i },
        })),
      });
      const res = await postGzip(tenant, gzipSync(json), encoding);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        received: 100,
        accepted: 100,
        rejected: 0,
        duplicates: 0,
        payloadBytes: Buffer.byteLength(json),
      });
      expect(await storedCount(tenant)).toBe(100);
    },
  );

  it('a decoded body over INGEST_MAX_BYTES is 413, although the gzip body is small', async () => {
    const tenant = await makeTenant(t.app);
    const json = JSON.stringify({ events: [{ eventName: 'a', payload: { pad: 'x'.repeat(LIMIT) } }] });
    const gz = gzipSync(json);
    expect(gz.length).toBeLessThan(10_000);
    const res = await postGzip(tenant, gz);
    expectProblem(res, 413, 'payload_too_large');
    expect(res.body).toMatchObject({ limitEvents: 1000, limitBytes: LIMIT, receivedEvents: null });
    expect(res.body.receivedBytes).toBeGreaterThan(LIMIT);
    expect(await storedCount(tenant)).toBe(0);
  });

  it('a gzip bomb (100 MiB of zeros) is refused once decompression passes the limit, in bounded memory', async () => {
    const tenant = await makeTenant(t.app);
    const bomb = await gzipBomb(100 * LIMIT);
    expect(bomb.length).toBeLessThan(200_000);
    global.gc?.();
    const rssBefore = process.memoryUsage().rss;
    const res = await postGzip(tenant, bomb);
    const rssGrowth = process.memoryUsage().rss - rssBefore;
    expectProblem(res, 413, 'payload_too_large');
    expect(res.body.receivedEvents).toBeNull();
    // Decompression stopped right after the limit: at most one more output chunk was produced.
    expect(res.body.receivedBytes).toBeGreaterThan(LIMIT);
    expect(res.body.receivedBytes).toBeLessThanOrEqual(LIMIT + 64 * 1024);
    // The server runs in this process: inflating the whole bomb would add about 100 MiB.
    expect(rssGrowth).toBeLessThan(40 * LIMIT);
    expect(await storedCount(tenant)).toBe(0);
  });

  it('a raw gzip body larger than the limit is refused from Content-Length, unread', async () => {
    const tenant = await makeTenant(t.app);
    const res = await request(t.http)
      .post('/api/ingest')
      .set(bearer(tenant.liveKey))
      .set('Content-Type', 'application/json')
      .set('Content-Encoding', 'gzip')
      .set('Content-Length', String(LIMIT + 100 * 1024))
      .send('x');
    expectProblem(res, 413, 'payload_too_large');
    expect(res.body).toMatchObject({ receivedEvents: null, receivedBytes: LIMIT + 100 * 1024 });
    expect(await storedCount(tenant)).toBe(0);
  });

  it.each([
    ['not gzip at all', Buffer.from('{"events":[{"eventName":"a"}]}')],
    ['a truncated gzip stream', gzipSync('{"events":[{"eventName":"a"}]}').subarray(0, 15)],
  ])('%s is 400 invalid_body', async (_label, body) => {
    const tenant = await makeTenant(t.app);
    const res = await postGzip(tenant, body);
    expectProblem(res, 400, 'invalid_body');
    expect(await storedCount(tenant)).toBe(0);
  });

  it('gzip of invalid JSON is 400 invalid_json', async () => {
    const tenant = await makeTenant(t.app);
    const res = await postGzip(tenant, gzipSync('{"events": [{'));
    expectProblem(res, 400, 'invalid_json');
    expect(await storedCount(tenant)).toBe(0);
  });
});
