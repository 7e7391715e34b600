import request from 'supertest';
import { bearer, makeTenant } from './factories';
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
    await request(t.http)
      .post('/api/ingest')
      .set(bearer(liveKey))
      .set('Content-Type', 'application/json')
      .send('{"events":[{"eventName":"Log.check"}]}');
    await request(t.http)
      .post('/api/ingest')
      .set(bearer(testKey))
      .set('Content-Type', 'text/plain')
      .send('x');
    await request(t.http)
      .post('/api/ingest')
      .set(bearer(apiKey))
      .set('Content-Type', 'application/json')
      .send('{}');
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
});
