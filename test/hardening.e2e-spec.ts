import request from 'supertest';
import type { Response } from 'superagent';
import { gunzipSync } from 'node:zlib';
import { NOT_FOUND_DETAIL } from '@app/common/problem.filter';
import { bearer, makeTenant, postIngest } from './factories';
import { expectProblem } from './support/problem';
import { startTestApp, TestApp } from './support/test-app';

// Bad input that once reached a 5xx, response size and caching rules, and the one
// control-character rule shared by ingest and the read filters.

const UNTHROTTLED = {
  INGEST_RATE_REQUESTS: '1000000',
  INGEST_RATE_EVENTS: '100000000',
  // Large and deeply nested bodies from one key: on a loaded machine their measured parse time
  // alone can spend the key's default CPU share (whose tests are in ingest-cpu-budget.e2e-spec.ts).
  INGEST_CPU_MS_PER_SECOND: '1000000',
  READ_RATE_REQUESTS: '1000000',
  AUTH_FAILURE_LIMIT: '1000000',
};

type Tenant = Awaited<ReturnType<typeof makeTenant>>;
type IngestBody = {
  received: number;
  accepted: number;
  rejected: number;
  errors: { index: number; field: string; code: string }[];
  warnings: { index: number; field: string; code: string }[];
  errorCounts: Record<string, number>;
  warningCounts: Record<string, number>;
};

/** `{"a":{"a":…{"a":1}…}}`, `depth` objects deep, built as text (a JS value that deep could not be stringified). */
function nestedObjectJson(depth: number): string {
  return '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
}

/**
 * Values sent as one header line each: Node's client writes an array that way, while supertest's
 * types take an array for Cookie only.
 */
const asHeaderLines = (values: string[]): string => values as unknown as string;

describe('hardening', () => {
  let t: TestApp;
  let tenant: Tenant;

  beforeAll(async () => {
    t = await startTestApp(UNTHROTTLED);
    tenant = await makeTenant(t.app);
  });
  afterAll(() => t.close());

  const ingestRaw = (body: string) => postIngest(t.http, tenant.liveKey, body);

  const storedNamed = async (eventName: string) => {
    const rows = (await t.db.query(
      'SELECT count(*)::int AS n FROM events WHERE app_id = $1 AND event_name = $2',
      [tenant.appId, eventName],
    )) as { n: number }[];
    return rows[0].n;
  };

  describe('deeply nested unknown fields', () => {
    it('an unknown field 6,000 objects deep rejects only its event, as event_too_large', async () => {
      const deep = `{"eventName":"Deep.object","extra":${nestedObjectJson(6000)}}`;
      const res = await ingestRaw(`{"events":[${deep},{"eventName":"Deep.sibling"}]}`);
      expect(res.status).toBe(200);
      const body = res.body as IngestBody;
      expect(body).toEqual(expect.objectContaining({ received: 2, accepted: 1, rejected: 1 }));
      expect(body.errors).toEqual([
        expect.objectContaining({ index: 0, field: 'event', code: 'event_too_large' }),
      ]);
      expect(await storedNamed('Deep.sibling')).toBe(1);
      expect(await storedNamed('Deep.object')).toBe(0);
    });

    it('arrays 200,000 deep are measured without recursion too', async () => {
      const deep = `{"eventName":"Deep.array","extra":${'['.repeat(200_000)}${']'.repeat(200_000)}}`;
      const res = await ingestRaw(`{"events":[${deep}]}`);
      expect(res.status).toBe(200);
      expect((res.body as IngestBody).errors).toEqual([
        expect.objectContaining({ index: 0, code: 'event_too_large' }),
      ]);
    });

    it('a deep unknown field within the size limit is ignored with a warning', async () => {
      const res = await ingestRaw(
        `{"events":[{"eventName":"Deep.small","extra":${nestedObjectJson(1000)}}]}`,
      );
      expect(res.status).toBe(200);
      expect(res.body).toEqual(expect.objectContaining({ accepted: 1, rejected: 0 }));
      expect((res.body as IngestBody).warnings).toEqual([
        expect.objectContaining({ index: 0, field: 'extra', code: 'ignored_field' }),
      ]);
    });
  });

  describe('instants moved out of range by their offset', () => {
    it.each([
      ['from', '9999-12-31T23:30:00-01:00'],
      ['to', '9999-12-31T23:30:00-01:00'],
      ['from', '1000-01-01T00:30:00+01:00'],
      ['to', '1000-01-01T00:00:00.000+00:01'],
    ])('events %s=%s is 400 invalid_query', async (param, value) => {
      const res = await request(t.http)
        .get('/api/v1/events')
        .query({ appId: tenant.appId, [param]: value })
        .set(bearer(tenant.apiKey));
      expectProblem(res, 400, 'invalid_query');
      expect(res.body.errors).toEqual([expect.objectContaining({ field: param })]);
    });

    it('the last and first representable instants are still accepted', async () => {
      for (const [from, to] of [
        ['9999-12-31T22:59:59.999-01:00', '9999-12-31T23:59:59.999Z'],
        ['1000-01-01T00:00:00Z', '1000-01-01T01:00:00+01:00'],
      ]) {
        const res = await request(t.http)
          .get('/api/v1/events')
          .query({ appId: tenant.appId, from, to })
          .set(bearer(tenant.apiKey));
        expect(res.status).toBe(200);
        expect(res.body).toEqual([]);
      }
    });

    it.each([
      { fromDate: '9999-12-31', toDate: '9999-12-31' },
      { fromDate: '1000-01-01', toDate: '1000-01-01' },
      { toDate: '1000-01-05' },
      { fromDate: '9999-12-01' },
    ])('rollups at the ends of the date range never get a 5xx: %j', async (dates) => {
      const res = await request(t.http)
        .get('/api/v1/rollups')
        .query({ appId: tenant.appId, ...dates })
        .set(bearer(tenant.apiKey));
      if (res.status === 200) expect(res.body).toEqual([]);
      else expectProblem(res, 400, 'invalid_query');
    });
  });

  describe('the not-found answer', () => {
    it('is a fixed text that never repeats the path', async () => {
      const res = await request(t.http).get(`/api/v1/events/${tenant.apiKey}`).set(bearer(tenant.apiKey));
      expectProblem(res, 404, 'not_found');
      expect(res.body.detail).toBe(NOT_FOUND_DETAIL);
      expect(res.text).not.toContain(tenant.apiKey.slice(-20));
    });
  });

  describe('listed errors are capped and counted', () => {
    it('lists at most 100 errors and counts all of them by code', async () => {
      const events = Array.from({ length: 150 }, (_, i) => (i % 3 === 2 ? { eventName: 7 } : { noName: 1 }));
      const res = await ingestRaw(JSON.stringify({ events }));
      expect(res.status).toBe(200);
      const body = res.body as IngestBody;
      expect(body.rejected).toBe(150);
      expect(body.errors).toHaveLength(100);
      expect(body.errors[0]).toEqual(expect.objectContaining({ index: 0, code: 'missing_field' }));
      expect(body.errorCounts).toEqual({ missing_field: 100, invalid_type: 50 });
      // Warnings of rejected events are neither listed nor counted.
      expect(body.warnings).toEqual([]);
      expect(body.warningCounts).toEqual({});
    });

    it('INGEST_MAX_ERRORS_LISTED sets the cap for errors and warnings', async () => {
      const small = await startTestApp({ ...UNTHROTTLED, INGEST_MAX_ERRORS_LISTED: '3' });
      try {
        const own = await makeTenant(small.app);
        const events = [
          ...Array.from({ length: 5 }, () => ({ eventName: '' })),
          ...Array.from({ length: 4 }, () => ({ eventName: 'Capped.warned', extra: true })),
        ];
        const res = await postIngest(small.http, own.liveKey, JSON.stringify({ events }));
        expect(res.status).toBe(200);
        const body = res.body as IngestBody;
        expect(body).toEqual(expect.objectContaining({ accepted: 4, rejected: 5 }));
        expect(body.errors.map((e) => e.index)).toEqual([0, 1, 2]);
        expect(body.errorCounts).toEqual({ invalid_value: 5 });
        expect(body.warnings.map((w) => w.index)).toEqual([5, 6, 7]);
        expect(body.warningCounts).toEqual({ ignored_field: 4 });
      } finally {
        await small.close();
      }
    });
  });

  describe('gzip responses', () => {
    let readable: string;

    /** Hands the answer's bytes over as they arrive, without parsing them. */
    const rawBytes = (r: Response, done: (err: Error | null, body: Buffer) => void) => {
      const chunks: Buffer[] = [];
      r.on('data', (c: Buffer) => chunks.push(c));
      r.on('end', () => done(null, Buffer.concat(chunks)));
    };

    /** The answer's text: the client may or may not have gunzipped the raw bytes it hands over. */
    const decodedText = (raw: Buffer): string => {
      try {
        return gunzipSync(raw).toString('utf8');
      } catch {
        return raw.toString('utf8');
      }
    };

    beforeAll(async () => {
      readable = 'Gzip.read';
      const events = Array.from({ length: 40 }, (_, i) => ({ eventName: readable, eventId: `gz-${i}` }));
      const res = await ingestRaw(JSON.stringify({ events }));
      expect(res.body.accepted).toBe(40);
    });

    it('a JSON answer over 1 KiB is gzipped when the client accepts gzip', async () => {
      const res = await request(t.http)
        .get('/api/v1/events')
        .query({ appId: tenant.appId, eventName: readable, limit: 40 })
        .set(bearer(tenant.apiKey))
        .set('Accept-Encoding', 'gzip')
        .buffer(true)
        .parse(rawBytes);
      expect(res.status).toBe(200);
      expect(res.headers['content-encoding']).toBe('gzip');
      expect(res.headers['vary']).toMatch(/Accept-Encoding/i);
      expect(JSON.parse(decodedText(res.body as Buffer))).toHaveLength(40);
    });

    it('an ingest answer over 1 KiB is gzipped when the client accepts gzip; a smaller one is not', async () => {
      // 30 events with an invalid eventName: each is listed among the errors, about 3 KiB of JSON.
      const rejected = JSON.stringify({ events: Array.from({ length: 30 }, () => ({ eventName: '' })) });
      const raw = await request(t.http)
        .post('/api/ingest')
        .set(bearer(tenant.liveKey))
        .set('Content-Type', 'application/json')
        .set('Accept-Encoding', 'gzip')
        .send(rejected)
        .buffer(true)
        .parse(rawBytes);
      expect(raw.status).toBe(200);
      expect(raw.headers['content-encoding']).toBe('gzip');
      expect(raw.headers['vary']).toBe('Accept-Encoding');
      const body = JSON.parse(decodedText(raw.body as Buffer)) as IngestBody;
      expect(body).toEqual(expect.objectContaining({ received: 30, accepted: 0, rejected: 30 }));
      expect(body.errors).toHaveLength(30);

      const plain = await request(t.http)
        .post('/api/ingest')
        .set(bearer(tenant.liveKey))
        .set('Content-Type', 'application/json')
        .set('Accept-Encoding', 'identity')
        .send(rejected);
      expect(plain.headers['content-encoding']).toBeUndefined();
      expect((plain.body as IngestBody).errors).toHaveLength(30);

      const small = await request(t.http)
        .post('/api/ingest')
        .set(bearer(tenant.liveKey))
        .set('Content-Type', 'application/json')
        .set('Accept-Encoding', 'gzip')
        .send(JSON.stringify({ events: [{ eventName: 'Gzip.small' }] }));
      expect(small.status).toBe(200);
      expect(small.headers['content-encoding']).toBeUndefined();
      expect(small.headers['vary']).toBe('Accept-Encoding');
      expect((small.body as IngestBody).accepted).toBe(1);
    });

    it('is not gzipped without Accept-Encoding, nor when small, nor for /metrics', async () => {
      const plain = await request(t.http)
        .get('/api/v1/events')
        .query({ appId: tenant.appId, eventName: readable, limit: 40 })
        .set(bearer(tenant.apiKey))
        .set('Accept-Encoding', 'identity');
      expect(plain.status).toBe(200);
      expect(plain.headers['content-encoding']).toBeUndefined();
      expect(plain.body).toHaveLength(40);

      const small = await request(t.http)
        .get('/api/v1/events')
        .query({ appId: tenant.appId, eventName: readable, limit: 1 })
        .set(bearer(tenant.apiKey))
        .set('Accept-Encoding', 'gzip');
      expect(small.status).toBe(200);
      expect(small.headers['content-encoding']).toBeUndefined();

      const metrics = await request(t.http).get('/metrics').set('Accept-Encoding', 'gzip');
      expect(metrics.status).toBe(200);
      expect(metrics.headers['content-encoding']).toBeUndefined();
    });
  });

  describe('control characters', () => {
    it.each([
      ['anonymousUserId', 'user\u0007'],
      ['sessionId', 'session\u0085'],
      ['anonymousUserId', '\u007f'],
      ['sessionId', 'tab\tsession'],
    ])('ingest rejects %s %j with invalid_value, and stores nothing', async (field, value) => {
      const res = await ingestRaw(
        JSON.stringify({ events: [{ eventName: 'Control.char', [field]: value }] }),
      );
      expect(res.status).toBe(200);
      expect(res.body).toEqual(expect.objectContaining({ accepted: 0, rejected: 1 }));
      expect((res.body as IngestBody).errors).toEqual([
        expect.objectContaining({ index: 0, field, code: 'invalid_value' }),
      ]);
      expect(await storedNamed('Control.char')).toBe(0);
    });

    it.each([
      ['anonymousUserId', 'user\u0007'],
      ['sessionId', 'session\u0085'],
      ['eventName', 'name\u009f'],
    ])('the read filter %s refuses %j by the same rule', async (field, value) => {
      const res = await request(t.http)
        .get('/api/v1/events')
        .query({ appId: tenant.appId, [field]: value })
        .set(bearer(tenant.apiKey));
      expectProblem(res, 400, 'invalid_query');
      expect(res.body.errors).toEqual([expect.objectContaining({ field })]);
    });

    it('other Unicode in identifiers is stored and can be filtered on', async () => {
      const sessionId = 'séance-😀-\u200d';
      const res = await ingestRaw(JSON.stringify({ events: [{ eventName: 'Control.ok', sessionId }] }));
      expect(res.body.accepted).toBe(1);
      const read = await request(t.http)
        .get('/api/v1/events')
        .query({ appId: tenant.appId, sessionId })
        .set(bearer(tenant.apiKey));
      expect(read.status).toBe(200);
      expect(read.body).toEqual([expect.objectContaining({ eventName: 'Control.ok', sessionId })]);
    });
  });

  describe('request headers and caching', () => {
    it('two Authorization headers get 400 invalid_header, before any key is looked at', async () => {
      for (const [path, keys] of [
        ['/api/v1/events', [tenant.apiKey, tenant.apiKey]],
        ['/api/v1/rollups', [tenant.apiKey, 'tly_api_nothing']],
      ] as const) {
        const res = await request(t.http)
          .get(path)
          .query({ appId: tenant.appId })
          .set('Authorization', asHeaderLines(keys.map((k) => `Bearer ${k}`)));
        expectProblem(res, 400, 'invalid_header');
        expect(res.headers['cache-control']).toBe('no-store');
      }
      const ingest = await request(t.http)
        .post('/api/ingest')
        .set('Authorization', asHeaderLines([`Bearer ${tenant.liveKey}`, `Bearer ${tenant.testKey}`]))
        .set('Content-Type', 'application/json')
        .send('{"events":[{"eventName":"Header.twice"}]}');
      expectProblem(ingest, 400, 'invalid_header');
      expect(await storedNamed('Header.twice')).toBe(0);
    });

    it('every answer carries Cache-Control: no-store', async () => {
      const answers = [
        await request(t.http).get('/api/v1/events').query({ appId: tenant.appId }).set(bearer(tenant.apiKey)),
        await request(t.http)
          .get('/api/v1/rollups')
          .query({ appId: tenant.appId })
          .set(bearer(tenant.apiKey)),
        await request(t.http).get('/api/v1/events').query({ appId: tenant.appId }),
        await ingestRaw('{"events":[{"eventName":"Header.cache"}]}'),
        await ingestRaw('{'),
        await request(t.http).get('/nowhere'),
        await request(t.http).get('/openapi.json'),
        await request(t.http).get('/healthz'),
        await request(t.http).options('/api/ingest').set('Origin', 'https://example.com'),
      ];
      expect(answers.map((r) => r.status)).toEqual([200, 200, 401, 200, 400, 404, 200, 200, 204]);
      for (const res of answers) expect(res.headers['cache-control']).toBe('no-store');
    });
  });
});
