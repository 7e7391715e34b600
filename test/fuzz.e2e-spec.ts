import request from 'supertest';
import fc from 'fast-check';
import { gzipSync } from 'node:zlib';
import { ERROR_TITLES } from '@app/common/app-error';
import { bearer, makeTenant } from './factories';
import { storedEventCount } from './factories/events';
import { percentEncode, RAW_QUERY_FRAGMENTS } from './support/query-text';
import { useTestApp } from './support/test-app';

// Property-based fuzzing of every endpoint. The invariants, whatever the input:
//  - no 5xx;
//  - an error is problem+json with a known, stable `code` and the matching status;
//  - the database holds exactly what ingest acknowledged as accepted, nothing more.

const KNOWN_CODES = new Set(Object.keys(ERROR_TITLES));
const RUNS = { numRuns: 80 };

type Tenant = Awaited<ReturnType<typeof makeTenant>>;

function sane(res: request.Response): string | null {
  if (res.status >= 500) return `status ${res.status}: ${res.text.slice(0, 300)}`;
  if (res.status >= 400) {
    if (!/^application\/problem\+json/.test(res.headers['content-type'] ?? '')) {
      return `status ${res.status} without problem+json: ${res.headers['content-type']}`;
    }
    const body = res.body as { code?: string; status?: number; requestId?: string };
    if (!body.code || !KNOWN_CODES.has(body.code)) return `unknown code ${body.code}`;
    if (body.status !== res.status) return `status ${body.status} in a ${res.status} body`;
    if (body.requestId !== res.headers['x-request-id']) return 'requestId differs from X-Request-Id';
  }
  return null;
}

function expectSane(res: request.Response) {
  expect(sane(res)).toBeNull();
}

// ---- generators -------------------------------------------------------------------------

const nasty = fc.constantFrom(
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\u0001\u001f\u007f',
  '\ud800',
  '\udfff\ud800',
  '\ufeff',
  '\u202e\u2066',
  '𝕿𝖆𝖑𝖑𝖞',
  'e\u0301\u0301\u0301',
  '👩‍👩‍👧‍👦',
  "'; DROP TABLE events; --",
  '${jndi:ldap://x}',
  '<script>alert(1)</script>',
  '__proto__',
  'constructor',
  'a'.repeat(201),
  'b'.repeat(5000),
);

const text = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.string({ minLength: 150, maxLength: 1200 }),
  nasty,
);

const number = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.constantFrom(
    0,
    -0,
    -1,
    1e308,
    -1e308,
    5e-324,
    Number.MAX_SAFE_INTEGER + 2,
    2 ** 63,
    -(2 ** 63),
    1.5,
    Date.now(),
    Date.now() + 86_400_000 * 365,
  ),
);

const scalar = fc.oneof(text, number, fc.boolean(), fc.constant(null));
const value = fc.oneof(
  { weight: 5, arbitrary: scalar },
  { weight: 1, arbitrary: fc.array(scalar, { maxLength: 3 }) },
  { weight: 1, arbitrary: fc.dictionary(text, scalar, { maxKeys: 3 }) },
);

const payloadKey = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.constantFrom(
    '__proto__',
    'constructor',
    'prototype',
    'toString',
    '',
    'k'.repeat(129),
    'a\u0000b',
    '$where',
  ),
);
const payload = fc.oneof(
  fc.dictionary(payloadKey, value, { maxKeys: 8 }),
  fc.dictionary(payloadKey, value, { minKeys: 99, maxKeys: 102 }),
  value,
);

const FIELDS = [
  'eventName',
  'anonymousUserId',
  'sessionId',
  'eventTime',
  'eventId',
  'isTestMode',
  'platform',
  'appVersion',
  'buildNumber',
  'osVersion',
  'deviceModel',
  'locale',
  'timezone',
  'floatValue',
  'privacyMode',
  'sentAt',
  'id',
  'appId',
] as const;

/** An event whose every field may be missing, of the wrong type or of a strange value. */
const event = fc
  .record(
    {
      ...Object.fromEntries(FIELDS.map((f) => [f, value])),
      eventName: fc.oneof(
        { weight: 3, arbitrary: fc.constantFrom('App.opened', 'Checkout.completed') },
        value,
      ),
      payload,
    },
    { requiredKeys: [] },
  )
  .map((e) => e as Record<string, unknown>);

/** Bodies that are not a well-formed envelope, as raw text. */
const malformedBody = fc.oneof(
  fc.string({ maxLength: 200 }),
  fc.string({ unit: 'binary', maxLength: 200 }),
  fc.json().map((j) => j.slice(0, Math.max(0, j.length - 1))),
  fc.jsonValue().map((v) => JSON.stringify(v)),
  fc.constantFrom(
    '',
    'null',
    'true',
    '[]',
    '"events"',
    '{}',
    '{"events":null}',
    '{"events":{}}',
    '{"events":"[]"}',
    '{"events":[]}',
    '{"events":[null]}',
    '{"events":[1,"a",true,[]]}',
    '{"events":[{}]}',
    '{"events":[{"eventName":"a"}],"events":5}',
    '{"events":5,"events":[{"eventName":"dup.key"}]}',
    '{"events":[{"eventName":"a","eventName":{"x":1}}]}',
    '{"__proto__":{"events":[{"eventName":"proto"}]}}',
    '{"constructor":{"prototype":{"polluted":1}},"events":[{"eventName":"c"}]}',
    '\ufeff{"events":[{"eventName":"bom"}]}',
    '{"events":[{"eventName":"nul\\u0000"}]}',
    '{"events":[{"eventName":"x","payload":{"k":"\\ud800"}}]}',
    '{"events":[{"eventName":"x","eventTime":1e400}]}',
    '{"events":[{"eventName":"x","floatValue":-1e400}]}',
    '{"events":[{"eventName":"x","eventTime":123456789012345678901234567890}]}',
    '{"events":[{"eventName":"x"}]} trailing',
    '{"events":[{"eventName":"x"}]}\u0000',
    '{"events":[' + '['.repeat(5000) + ']'.repeat(5000) + ']}',
    '{"events":[{"eventName":"deep","payload":' + '{"a":'.repeat(3000) + '1' + '}'.repeat(3000) + '}]}',
    '['.repeat(100_000),
    '{"events":[{"eventName":"x"}]',
    "{'events':[{'eventName':'single'}]}",
  ),
);

const contentType = fc.constantFrom(
  undefined,
  '',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/jsonx',
  'application/json; charset=utf-16',
  'application/json; charset=latin1',
  'APPLICATION/JSON',
  'application/json;;;',
  'application/*',
  'application/vnd.api+json',
);

const ENVELOPE = Buffer.from(JSON.stringify({ events: [{ eventName: 'Enc.test' }] }));
const encodedBody = fc.constantFrom(
  { encoding: 'gzip', body: Buffer.from('not gzip at all') },
  { encoding: 'gzip', body: gzipSync(ENVELOPE).subarray(0, 12) },
  { encoding: 'deflate', body: ENVELOPE },
  { encoding: 'br', body: ENVELOPE },
  { encoding: 'compress', body: ENVELOPE },
  { encoding: 'gzip, gzip', body: gzipSync(gzipSync(ENVELOPE)) },
  { encoding: 'identity', body: ENVELOPE },
  { encoding: 'GZIP', body: gzipSync(ENVELOPE) },
  { encoding: 'gzip', body: gzipSync(Buffer.from('{"events":[')) },
  { encoding: 'gzip', body: gzipSync(Buffer.from([0xff, 0xfe, 0x7b, 0x00])) },
  { encoding: '', body: Buffer.from([0xc3, 0x28, 0xa0, 0xa1]) },
  { encoding: '', body: Buffer.from('\ufeff{"events":[{"eventName":"bom"}]}', 'utf16le') },
);

/** Query parameter values: injections, odd numbers, dates, Unicode, NUL, long strings. */
const queryValue = fc.oneof(
  text,
  fc.integer().map(String),
  fc.double().map(String),
  fc.constantFrom(
    '0',
    '-1',
    '1001',
    '1.5',
    '1e3',
    '0x10',
    ' 10',
    'NaN',
    'Infinity',
    '2026-02-30',
    '2026-13-01',
    '0000-01-01',
    '9999-12-31',
    '+275760-09-13',
    '366d',
    '367d',
    '0d',
    '-1d',
    '1D',
    'true',
    'all',
    'TRUE',
    '%00',
    "1' OR '1'='1",
  ),
);

const EVENT_PARAMS = [
  'appId',
  'limit',
  'eventName',
  'anonymousUserId',
  'sessionId',
  'from',
  'to',
  'testMode',
  'cursor',
  'range',
  'unknown',
];
const ROLLUP_PARAMS = ['appId', 'fromDate', 'toDate', 'range', 'eventName', 'testMode', 'limit', 'unknown'];

/** Raw fragments that are not valid percent-encoding or not valid UTF-8 once decoded. */
const rawQueryValue = fc.constantFrom(...RAW_QUERY_FRAGMENTS);

function queryString(appId: string, params: [string, string, boolean][], keepAppId: boolean): string {
  const parts = keepAppId ? [`appId=${appId}`] : [];
  for (const [name, v, raw] of params) parts.push(`${name}=${raw ? v : percentEncode(v)}`);
  return parts.join('&');
}

const queryFor = (names: string[]) =>
  fc.record({
    params: fc.array(
      fc.oneof(
        { weight: 4, arbitrary: fc.tuple(fc.constantFrom(...names), queryValue, fc.constant(false)) },
        { weight: 1, arbitrary: fc.tuple(fc.constantFrom(...names), rawQueryValue, fc.constant(true)) },
      ),
      { maxLength: 4 },
    ),
    keepAppId: fc.boolean(),
  });

/** Header values Node accepts (no CR, LF or characters outside Latin-1). */
function authorizationFor(tenant: Tenant) {
  const keys = [tenant.liveKey, tenant.testKey, tenant.apiKey];
  const mutate = fc
    .tuple(fc.constantFrom(...keys), fc.nat(60), fc.constantFrom('flip', 'cut', 'append', 'case', 'space'))
    .map(([key, at, how]) => {
      const i = at % key.length;
      switch (how) {
        case 'flip':
          return key.slice(0, i) + (key[i] === 'A' ? 'B' : 'A') + key.slice(i + 1);
        case 'cut':
          return key.slice(0, i);
        case 'append':
          return key + 'x';
        case 'case':
          return key.toUpperCase();
        default:
          return key.slice(0, i) + ' ' + key.slice(i);
      }
    });
  const token = fc.oneof(mutate, fc.string({ maxLength: 80 }), fc.constantFrom(...keys));
  return fc
    .oneof(
      token.map((k) => `Bearer ${k}`),
      token.map((k) => `bearer  ${k}`),
      token.map((k) => `Basic ${k}`),
      token,
      fc.tuple(token, token).map(([x, y]) => `Bearer ${x}, Bearer ${y}`),
      fc.tuple(token, token).map(([x, y]) => `Bearer ${x} ${y}`),
      fc.string({ unit: 'binary-ascii', maxLength: 200 }),
      fc.string({ minLength: 2000, maxLength: 4000 }),
      fc.constantFrom('', 'Bearer', 'Bearer ', 'Bearer\t', 'Token x', 'Bearer null', 'Bearer undefined'),
    )
    .filter((h) => /^[\t\x20-\x7e\x80-\xff]*$/.test(h));
}

// ---- properties -------------------------------------------------------------------------

describe('fuzzing: no 5xx, problem+json with a stable code, and only accepted events stored', () => {
  const t = useTestApp({
    INGEST_RATE_REQUESTS: '10000000',
    INGEST_RATE_EVENTS: '1000000000',
    READ_RATE_REQUESTS: '10000000',
    AUTH_FAILURE_LIMIT: '10000000',
  });
  let tenant: Tenant;
  /** Events ingest acknowledged as accepted, to compare with what the database holds. */
  let accepted = 0;

  beforeAll(async () => {
    tenant = await makeTenant(t.app);
  });

  const stored = () => storedEventCount(t.db, tenant.appId);

  /** Sends one ingest request and checks the invariants, including the stored row count. */
  async function ingestChecked(send: () => request.Test): Promise<request.Response> {
    const before = await stored();
    const res = await send();
    expectSane(res);
    let expected = before;
    if (res.status === 200) {
      const b = res.body as Record<string, number>;
      expect(b.received).toBe(b.accepted + b.duplicates + b.rejected);
      expected += b.accepted;
      accepted += b.accepted;
    }
    expect(await stored()).toBe(expected);
    return res;
  }

  const post = () => request(t.http).post('/api/ingest').set(bearer(tenant.liveKey));

  it('ingest: events with arbitrary fields and values', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(event, { minLength: 1, maxLength: 20 }), async (events) => {
        const res = await ingestChecked(() =>
          post().set('Content-Type', 'application/json').send(JSON.stringify({ events })),
        );
        // A valid envelope is 200 even when every event is rejected; only a body over the byte
        // limit (possible with many long generated values) is refused as a whole.
        expect([200, 413]).toContain(res.status);
        const errors =
          res.status === 200 ? (res.body as { errors: { index: number; code: string }[] }).errors : [];
        for (const e of errors) {
          expect(e.index).toBeGreaterThanOrEqual(0);
          expect(e.index).toBeLessThan(events.length);
          expect(e.code).toMatch(/^[a-z][a-z0-9_]*$/);
        }
      }),
      RUNS,
    );
  });

  it('ingest: malformed, truncated, deep, duplicate-key and prototype-polluting bodies', async () => {
    await fc.assert(
      fc.asyncProperty(malformedBody, async (body) => {
        await ingestChecked(() => post().set('Content-Type', 'application/json').send(body));
        expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      }),
      RUNS,
    );
  });

  it('ingest: wrong content types', async () => {
    await fc.assert(
      fc.asyncProperty(contentType, fc.array(event, { maxLength: 3 }), async (type, events) => {
        const res = await ingestChecked(() => {
          const req = post();
          if (type !== undefined) req.set('Content-Type', type);
          return req.send(Buffer.from(JSON.stringify({ events })));
        });
        if (type === undefined || !/^application\/json\s*(;|$)/i.test(type)) {
          expect(res.status).toBe(415);
          expect(res.body.code).toBe('unsupported_media_type');
        }
      }),
      { numRuns: 30 },
    );
  });

  it('ingest: wrong and broken content encodings', async () => {
    await fc.assert(
      fc.asyncProperty(encodedBody, async ({ encoding, body }) => {
        const res = await ingestChecked(() => {
          const req = post().set('Content-Type', 'application/json');
          if (encoding) req.set('Content-Encoding', encoding);
          // Written raw: superagent's send() would process an encoded buffer itself.
          req.write(body);
          return req;
        });
        // Content codings are case-insensitive; these two carry a valid envelope.
        if (encoding === 'GZIP' || encoding === 'identity') expect(res.body.accepted).toBe(1);
      }),
      { numRuns: 30 },
    );
  });

  it('events: arbitrary query strings', async () => {
    await fc.assert(
      fc.asyncProperty(queryFor(EVENT_PARAMS), async ({ params, keepAppId }) => {
        const res = await request(t.http)
          .get(`/api/v1/events?${queryString(tenant.appId, params, keepAppId)}`)
          .set(bearer(tenant.apiKey));
        expectSane(res);
        if (res.status === 200) expect(Array.isArray(res.body)).toBe(true);
      }),
      RUNS,
    );
  });

  it('rollups: arbitrary query strings', async () => {
    await fc.assert(
      fc.asyncProperty(queryFor(ROLLUP_PARAMS), async ({ params, keepAppId }) => {
        const res = await request(t.http)
          .get(`/api/v1/rollups?${queryString(tenant.appId, params, keepAppId)}`)
          .set(bearer(tenant.apiKey));
        expectSane(res);
        if (res.status === 200) expect(Array.isArray(res.body)).toBe(true);
      }),
      RUNS,
    );
  });

  it('Authorization headers: only an exact key of the right kind gets in', async () => {
    const exact = new Map([
      [`Bearer ${tenant.liveKey}`, 'ingest'],
      [`Bearer ${tenant.testKey}`, 'ingest'],
      [`Bearer ${tenant.apiKey}`, 'read'],
    ]);
    await fc.assert(
      fc.asyncProperty(
        authorizationFor(tenant),
        fc.constantFrom('ingest', 'events', 'rollups'),
        async (header, endpoint) => {
          const res =
            endpoint === 'ingest'
              ? await ingestChecked(() =>
                  post()
                    .set('Authorization', header)
                    .set('Content-Type', 'application/json')
                    .send('{"events":[{"eventName":"Auth.fuzz"}]}'),
                )
              : await request(t.http)
                  .get(`/api/v1/${endpoint}?appId=${tenant.appId}`)
                  .set('Authorization', header);
          expectSane(res);
          // The scheme is case-insensitive and surrounding spaces are tolerated (RFC 6750).
          const normalised = header.replace(/^bearer\s+/i, 'Bearer ').trim();
          const kind = exact.get(normalised);
          const allowed = kind === (endpoint === 'ingest' ? 'ingest' : 'read');
          if (allowed) {
            expect(res.status).toBe(200);
          } else {
            expect(res.status).toBe(401);
            expect(['invalid_key', 'wrong_key_type']).toContain(res.body.code);
            expect(res.headers['www-authenticate']).toMatch(/^Bearer realm="tally"/);
          }
        },
      ),
      { numRuns: 80 },
    );
  });

  it('the database holds exactly the accepted events', async () => {
    expect(accepted).toBeGreaterThan(0);
    expect(await stored()).toBe(accepted);
  });
});
