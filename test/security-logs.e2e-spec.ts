import { AsyncLocalStorage } from 'node:async_hooks';
import request from 'supertest';
import { bearer, makeTenant, postIngest } from './factories';
import { useTestApp } from './support/test-app';

// Its own file: nestjs-pino keeps one logger per module registry, so the log level and the
// captured stream must not be shared with the apps of another suite.

const UNTHROTTLED = {
  INGEST_RATE_REQUESTS: '1000000',
  INGEST_RATE_EVENTS: '100000000',
  READ_RATE_REQUESTS: '1000000',
  AUTH_FAILURE_LIMIT: '1000000',
};

describe('keys never reach the logs', () => {
  const lines: string[] = [];
  const t = useTestApp(
    { ...UNTHROTTLED, LOG_LEVEL: 'debug' },
    { logDestination: { write: (line: string) => lines.push(line) } },
  );
  let tenant: Awaited<ReturnType<typeof makeTenant>>;

  beforeAll(async () => {
    tenant = await makeTenant(t.app);
    // Only the lines of the requests below count.
    lines.length = 0;
  });

  it('valid, invalid, wrong-kind and misplaced keys are absent from every log line', async () => {
    const { liveKey, testKey, apiKey, appId } = tenant;
    await postIngest(t.http, liveKey, '{"events":[{"eventName":"Log.check"}]}');
    await request(t.http)
      .post('/api/ingest')
      .set(bearer(testKey))
      .set('Content-Type', 'text/plain')
      .send('x');
    await postIngest(t.http, apiKey, '{}');
    await request(t.http).get('/api/v1/events').query({ appId }).set(bearer(apiKey));
    await request(t.http).get('/api/v1/rollups').query({ appId }).set(bearer(liveKey));
    await request(t.http)
      .get('/api/v1/events')
      .query({ appId })
      .set(bearer(`${apiKey}0`));
    await request(t.http).get('/api/v1/events').query({ appId }).set('Authorization', `Basic ${apiKey}`);
    await request(t.http).get('/api/v1/events').query({ appId }).set('X-Api-Key', apiKey);
    // A client that wrongly puts its key in the URL must not have it written to the logs.
    await request(t.http).get('/api/v1/events').query({ appId, key: apiKey }).set(bearer(apiKey));
    await request(t.http).get(`/api/v1/events/${apiKey}`).set(bearer(apiKey));

    // One line per request, ingest included (its line is written outside nestjs-pino's middleware).
    const ingestLines = lines
      .map(
        (l) =>
          JSON.parse(l) as {
            msg?: string;
            req?: { url?: string; method?: string };
            res?: { statusCode?: number };
          },
      )
      .filter((l) => l.req?.url === '/api/ingest');
    expect(ingestLines.map((l) => [l.msg, l.req?.method, l.res?.statusCode])).toEqual([
      ['request completed', 'POST', 200],
      ['request completed', 'POST', 415],
      ['request completed', 'POST', 401],
    ]);
    const log = lines.join('');
    expect(lines.length).toBeGreaterThanOrEqual(10);
    expect(log).toContain('[redacted]');
    for (const key of [liveKey, testKey, apiKey]) {
      const secret = key.replace(/^tly_[a-z]+_/, '');
      expect(log).not.toContain(secret.slice(0, 20));
      expect(log).not.toContain(secret.slice(-20));
    }
  });

  it('serves and logs requests without entering an async context, so promise hooks stay off', async () => {
    // One run() of any AsyncLocalStorage turns on Node's promise hooks for the whole process,
    // after which every promise of every request pays for them.
    const run = jest.spyOn(AsyncLocalStorage.prototype, 'run');
    const enterWith = jest.spyOn(AsyncLocalStorage.prototype, 'enterWith');
    try {
      const { liveKey, apiKey, appId } = tenant;
      const start = lines.length;
      const statuses = [
        (await request(t.http).get('/healthz')).status,
        (await request(t.http).get('/api/v1/events').query({ appId }).set(bearer(apiKey))).status,
        (await request(t.http).get('/api/v1/rollups').query({ appId }).set(bearer(apiKey))).status,
        (await request(t.http).get('/api/v1/nothing-here').set(bearer(apiKey))).status,
        (await postIngest(t.http, liveKey, '{"events":[{"eventName":"Hooks.check"}]}')).status,
      ];
      expect(statuses).toEqual([200, 200, 200, 404, 200]);
      expect(run).not.toHaveBeenCalled();
      expect(enterWith).not.toHaveBeenCalled();
      // Still one request line each, with its id. Lines of background work (a deletion another
      // test file left for any instance to run, the scheduled upkeep) are not requests' lines.
      const logged = lines
        .slice(start)
        .map((l) => JSON.parse(l) as { req?: { id?: string; url?: string } })
        .filter((l) => l.req !== undefined);
      expect(logged.map((l) => l.req?.url?.split('?')[0])).toEqual([
        '/healthz',
        '/api/v1/events',
        '/api/v1/rollups',
        '/api/v1/nothing-here',
        '/api/ingest',
      ]);
      for (const l of logged) expect(l.req?.id).toMatch(/\S/);
    } finally {
      run.mockRestore();
      enterWith.mockRestore();
    }
  });

  it('a key percent-encoded in the URL is masked too, after decoding', async () => {
    const { apiKey, liveKey, appId } = tenant;
    const encodeAll = (s: string) =>
      [...Buffer.from(s)].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join('');
    const start = lines.length;
    // The prefix's underscores encoded, every character encoded, double encoding, and an
    // encoding that is not valid UTF-8 elsewhere in the URL.
    await request(t.http)
      .get(`/api/v1/events/${apiKey.replace(/_/g, '%5F')}`)
      .set(bearer(apiKey));
    await request(t.http)
      .get(`/api/v1/events/${encodeAll(liveKey)}`)
      .set(bearer(apiKey));
    await request(t.http)
      .get(`/api/v1/events?appId=${appId}&k=${encodeAll(apiKey).replace(/%/g, '%25')}`)
      .set(bearer(apiKey));
    await request(t.http)
      .get(`/api/v1/events?x=%ff%fe&k=tly%5Flive%5F${liveKey.slice(9)}`)
      .set(bearer(apiKey));
    const logged = lines.slice(start);
    expect(logged).toHaveLength(4);
    const log = logged.join('');
    // What a reader of the log could decode: every ASCII escape, twice.
    const asciiDecode = (x: string) =>
      x.replace(/%([0-7][0-9A-Fa-f])/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
    const decoded = asciiDecode(asciiDecode(log));
    for (const key of [liveKey, apiKey]) {
      const secret = key.replace(/^tly_[a-z]+_/, '');
      expect(decoded).not.toContain(secret.slice(0, 20));
      expect(decoded).not.toContain(secret.slice(-20));
    }
    expect(log.match(/\[redacted\]/g)?.length ?? 0).toBeGreaterThanOrEqual(4);
  });
});
