import request from 'supertest';
import { gzipSync } from 'node:zlib';
import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { KeyRepository } from '@app/auth/key.repository';
import { hashKey } from '@app/auth/key-format';
import { bearer, makeApiKey, makeTenant, postIngest } from './factories';
import { seedEvents, storedEventCount } from './factories/events';
import { startTestApp, TestApp, useTestApp } from './support/test-app';
import { expectProblem } from './support/problem';

// Each `describe` below is one item of the OWASP API Security Top 10 (2023); docs/security.md
// maps the items to these tests.

type Tenant = Awaited<ReturnType<typeof makeTenant>>;

/** A problem document without the members that differ between two requests. */
function comparable(res: request.Response) {
  const { requestId: _requestId, ...rest } = res.body as Record<string, unknown>;
  return { status: res.status, body: rest, wwwAuthenticate: res.headers['www-authenticate'] };
}

const UNTHROTTLED = {
  INGEST_RATE_REQUESTS: '1000000',
  INGEST_RATE_EVENTS: '100000000',
  READ_RATE_REQUESTS: '1000000',
  AUTH_FAILURE_LIMIT: '1000000',
};

const HOUR = 3_600_000;

const countEvents = (t: TestApp, appId: string) => storedEventCount(t.db, appId);

describe('security review (OWASP API Security Top 10, 2023)', () => {
  const t = useTestApp(UNTHROTTLED);
  let a: Tenant;
  let b: Tenant;

  beforeAll(async () => {
    a = await makeTenant(t.app);
    b = await makeTenant(t.app);
    const now = Date.now();
    await seedEvents(
      t.db,
      a.appId,
      [1, 2, 3].map((i) => ({ eventName: 'A.seen', receivedAt: now - i * HOUR, eventId: `a-${i}` })),
    );
    await seedEvents(
      t.db,
      b.appId,
      [1, 2, 3].map((i) => ({
        eventName: 'B.secret',
        receivedAt: now - i * HOUR,
        eventId: `b-${i}`,
        anonymousUserId: `b-user-${i}`,
      })),
    );
  });

  const ingest = (key: string, body: unknown) => postIngest(t.http, key, body);

  describe('API1 broken object level authorization', () => {
    it.each(['/api/v1/events', '/api/v1/rollups'])(
      '%s: a valid key of app A cannot read app B, and the 403 is the same as for an app that does not exist',
      async (endpoint) => {
        const other = await request(t.http).get(endpoint).query({ appId: b.appId }).set(bearer(a.apiKey));
        const missing = await request(t.http)
          .get(endpoint)
          .query({ appId: randomUUID() })
          .set(bearer(a.apiKey));
        expectProblem(other, 403, 'app_forbidden');
        expectProblem(missing, 403, 'app_forbidden');
        expect(comparable(other)).toEqual(comparable(missing));
        expect(other.text).not.toContain('B.secret');
      },
    );

    it.each([
      ['an upper-case id', () => ({ appId: b.appId.toUpperCase() }), 403, 'app_forbidden'],
      ['a repeated appId (own, then other)', () => ({ appId: [a.appId, b.appId] }), 400, 'invalid_query'],
      ['a repeated appId (other, then own)', () => ({ appId: [b.appId, a.appId] }), 400, 'invalid_query'],
    ] as const)('events: %s never yields app B rows', async (_label, query, status, code) => {
      const res = await request(t.http).get('/api/v1/events').query(query()).set(bearer(a.apiKey));
      expectProblem(res, status, code);
      expect(res.text).not.toContain('B.secret');
    });

    it('a key for both apps reads each one separately, never mixed', async () => {
      const both = await makeApiKey(t.app, [a.appId, b.appId]);
      const res = await request(t.http).get('/api/v1/events').query({ appId: a.appId }).set(bearer(both.key));
      expect(res.status).toBe(200);
      expect(res.body.length).toBeGreaterThan(0);
      expect(res.body.every((e: { appId: string }) => e.appId === a.appId)).toBe(true);
    });

    it('a cursor from app B, replayed on app A, never returns app B rows', async () => {
      const pageB = await request(t.http)
        .get('/api/v1/events')
        .query({ appId: b.appId, limit: 1 })
        .set(bearer(b.apiKey));
      expect(pageB.status).toBe(200);
      const cursor = pageB.headers['x-next-cursor'];
      expect(typeof cursor).toBe('string');
      const replay = await request(t.http)
        .get('/api/v1/events')
        .query({ appId: a.appId, cursor })
        .set(bearer(a.apiKey));
      // A cursor is bound to the app and filters it was issued for.
      expectProblem(replay, 400, 'invalid_cursor');
      expect(replay.text).not.toContain('B.secret');
    });

    it('ingest stores events under the key’s app, whatever app id the body names', async () => {
      const before = await countEvents(t, b.appId);
      const res = await ingest(a.liveKey, {
        appId: b.appId,
        events: [{ eventName: 'Cross.write', appId: b.appId, app_id: b.appId, eventId: randomUUID() }],
      });
      expect(res.status).toBe(200);
      expect(res.body.accepted).toBe(1);
      expect(await countEvents(t, b.appId)).toBe(before);
      const rows = (await t.db.query(`SELECT app_id FROM events WHERE event_name = 'Cross.write'`)) as {
        app_id: string;
      }[];
      expect(rows.map((r) => r.app_id)).toEqual([a.appId]);
    });
  });

  describe('API2 broken authentication', () => {
    it('keys are stored as a SHA-256 hash; no column holds the key or its secret', async () => {
      const key = await makeApiKey(t.app, [a.appId]);
      const rows = (await t.db.query(
        `SELECT key_hash, row_to_json(k)::text AS json FROM keys k WHERE id = $1`,
        [key.id],
      )) as { key_hash: Buffer; json: string }[];
      expect(rows[0].key_hash.equals(hashKey(key.key))).toBe(true);
      const secret = key.key.slice('tly_api_'.length, -6);
      expect(rows[0].json).not.toContain(secret);
      expect(rows[0].json).not.toContain(secret.slice(0, 16));
    });

    it('a presented key is looked up by its hash (no string comparison of secrets in the process)', async () => {
      const repo = t.app.get(KeyRepository);
      const spy = jest.spyOn(repo, 'findByHash');
      try {
        // A fresh key, never used, so not cached: the process must look it up.
        const unknown = (await makeApiKey(t.app, [a.appId])).key;
        await request(t.http).get('/api/v1/events').query({ appId: a.appId }).set(bearer(unknown));
        expect(spy).toHaveBeenCalledTimes(1);
        const arg = spy.mock.calls[0][0];
        expect(Buffer.isBuffer(arg)).toBe(true);
        expect(arg.equals(hashKey(unknown))).toBe(true);
        expect(arg.toString('latin1')).not.toContain(unknown);

        // A mistyped key fails its checksum and never reaches the database.
        spy.mockClear();
        const mistyped = unknown.slice(0, 20) + (unknown[20] === 'a' ? 'b' : 'a') + unknown.slice(21);
        const res = await request(t.http)
          .get('/api/v1/events')
          .query({ appId: a.appId })
          .set(bearer(mistyped));
        expectProblem(res, 401, 'invalid_key');
        expect(spy).not.toHaveBeenCalled();
      } finally {
        spy.mockRestore();
      }
    });

    it('the lookup is an equality match on the unique hash index', () => {
      const source = fs.readFileSync(path.join(__dirname, '../src/auth/key.repository.ts'), 'utf8');
      expect(source).toMatch(/key_hash = :hash/);
      const migration = fs.readFileSync(
        path.join(__dirname, '../migrations/1763780000000-initial-schema.ts'),
        'utf8',
      );
      expect(migration).toMatch(/CREATE UNIQUE INDEX keys_key_hash ON keys \(key_hash\)/);
    });
  });

  describe('API3 broken object property level authorization', () => {
    const RECORD_FIELDS = [
      'id',
      'appId',
      'eventName',
      'anonymousUserId',
      'sessionId',
      'eventTime',
      'timestamp',
      'receivedAt',
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
      'payload',
    ].sort();

    it('an event record exposes exactly the documented fields', async () => {
      const res = await request(t.http).get('/api/v1/events').query({ appId: a.appId }).set(bearer(a.apiKey));
      expect(res.status).toBe(200);
      for (const record of res.body as Record<string, unknown>[]) {
        expect(Object.keys(record).sort()).toEqual(RECORD_FIELDS);
      }
    });

    it('clients cannot set server-owned properties (id, receivedAt, test mode of a test key)', async () => {
      const eventId = `mass-${randomUUID()}`;
      const res = await ingest(a.testKey, {
        events: [{ eventName: 'Mass.assign', eventId, id: 1, receivedAt: 0, isTestMode: false }],
      });
      expect(res.status).toBe(200);
      expect(res.body).toEqual(expect.objectContaining({ accepted: 1, metered: 0, testMode: true }));
      const rows = (await t.db.query(
        `SELECT id::text, is_test_mode, received_at FROM events WHERE app_id = $1 AND event_id = $2`,
        [a.appId, eventId],
      )) as { id: string; is_test_mode: boolean; received_at: Date }[];
      expect(rows).toHaveLength(1);
      expect(rows[0].is_test_mode).toBe(true);
      expect(rows[0].received_at.getTime()).toBeGreaterThan(Date.now() - HOUR);
    });
  });

  describe('API4 unrestricted resource consumption', () => {
    it.each([
      ['limit=1001', { limit: '1001' }],
      ['limit=1000000', { limit: '1000000' }],
      ['limit=-1', { limit: '-1' }],
      ['limit=99999999999999999999', { limit: '99999999999999999999' }],
    ])('events: %s is 400 invalid_query', async (_label, query) => {
      const res = await request(t.http)
        .get('/api/v1/events')
        .query({ appId: a.appId, ...query })
        .set(bearer(a.apiKey));
      expectProblem(res, 400, 'invalid_query');
    });

    it.each([
      ['range=367d', { range: '367d' }],
      ['range=100000d', { range: '100000d' }],
      ['a span of 367 days', { fromDate: '2025-01-01', toDate: '2026-01-03' }],
      ['fromDate far in the past', { fromDate: '0001-01-01' }],
    ])('rollups: %s is 400 invalid_query', async (_label, query) => {
      const res = await request(t.http)
        .get('/api/v1/rollups')
        .query({ appId: a.appId, ...query })
        .set(bearer(a.apiKey));
      expectProblem(res, 400, 'invalid_query');
    });

    it('a body over INGEST_MAX_BYTES is 413 with the limits, and nothing is stored', async () => {
      const before = await countEvents(t, a.appId);
      const big = 'x'.repeat(1100);
      const events = Array.from({ length: 1000 }, (_, i) => ({
        eventName: 'Big.body',
        eventId: `big-${i}`,
        payload: { big },
      }));
      const res = await ingest(a.liveKey, { events });
      expectProblem(res, 413, 'payload_too_large');
      expect(res.body).toEqual(expect.objectContaining({ limitBytes: 1_048_576, limitEvents: 1000 }));
      expect(await countEvents(t, a.appId)).toBe(before);
    });

    it('more than INGEST_MAX_EVENTS events is 413, and nothing is stored', async () => {
      const before = await countEvents(t, a.appId);
      const events = Array.from({ length: 1001 }, (_, i) => ({ eventName: 'Many', eventId: `many-${i}` }));
      const res = await ingest(a.liveKey, { events });
      expectProblem(res, 413, 'payload_too_large');
      expect(res.body).toEqual(expect.objectContaining({ limitEvents: 1000 }));
      expect(await countEvents(t, a.appId)).toBe(before);
    });

    it('a gzip bomb (64 MiB inflated from a small body) is 413, measured after decompression', async () => {
      const before = await countEvents(t, a.appId);
      const inflated = Buffer.concat([
        Buffer.from('{"events":[{"eventName":"Bomb","payload":{"k":"'),
        Buffer.alloc(64 * 1024 * 1024, 0x61),
        Buffer.from('"}}]}'),
      ]);
      const bomb = gzipSync(inflated, { level: 9 });
      expect(bomb.length).toBeLessThan(1_048_576);
      const req = request(t.http)
        .post('/api/ingest')
        .set(bearer(a.liveKey))
        .set('Content-Type', 'application/json')
        .set('Content-Encoding', 'gzip');
      // Written raw: superagent's send() would treat the encoded buffer as its own to process.
      req.write(bomb);
      const res = await req;
      expectProblem(res, 413, 'payload_too_large');
      expect(await countEvents(t, a.appId)).toBe(before);
    });

    it('the HTTP server bounds slow requests (slowloris): header and request timeouts are set', () => {
      // Node's defaults are 60 s for headers and 300 s for a whole request; a client that
      // trickles a body would hold a socket and a body buffer for five minutes.
      expect(t.http.headersTimeout).toBeGreaterThan(0);
      expect(t.http.headersTimeout).toBeLessThanOrEqual(20_000);
      expect(t.http.requestTimeout).toBeGreaterThan(0);
      expect(t.http.requestTimeout).toBeLessThanOrEqual(60_000);
    });
  });

  describe('API5 broken function level authorization', () => {
    it('an ingest key cannot read, and an API key cannot ingest', async () => {
      const read = await request(t.http)
        .get('/api/v1/events')
        .query({ appId: a.appId })
        .set(bearer(a.liveKey));
      expectProblem(read, 401, 'wrong_key_type');
      const write = await ingest(a.apiKey, { events: [{ eventName: 'Nope' }] });
      expectProblem(write, 401, 'wrong_key_type');
    });

    it('a key with one scope cannot use the other endpoint (no scope escalation)', async () => {
      const eventsOnly = await makeApiKey(t.app, [a.appId], ['events:read']);
      const rollupsOnly = await makeApiKey(t.app, [a.appId], ['rollups:read']);
      const r1 = await request(t.http)
        .get('/api/v1/rollups')
        .query({ appId: a.appId })
        .set(bearer(eventsOnly.key));
      expectProblem(r1, 403, 'insufficient_scope');
      expect(r1.headers['www-authenticate']).toContain('scope="rollups:read"');
      const r2 = await request(t.http)
        .get('/api/v1/events')
        .query({ appId: a.appId })
        .set(bearer(rollupsOnly.key));
      expectProblem(r2, 403, 'insufficient_scope');
      // Asking for a scope in the request grants nothing.
      const r3 = await request(t.http)
        .get('/api/v1/events')
        .query({ appId: a.appId, scope: 'events:read' })
        .set(bearer(rollupsOnly.key));
      expect(r3.status).toBe(403);
    });

    it.each([
      ['POST', '/api/v1/events'],
      ['DELETE', '/api/v1/events'],
      ['PUT', '/api/v1/rollups'],
      ['GET', '/api/ingest'],
      ['GET', '/api/v1/apps'],
      ['POST', '/api/v1/keys'],
      ['GET', '/api/admin'],
      ['GET', '/api/v2/events'],
    ])('%s %s does not exist (administration is CLI-only)', async (method, url) => {
      const res = await request(t.http)
        [method.toLowerCase() as 'get' | 'post' | 'put' | 'delete'](url)
        .set(bearer(a.apiKey));
      expect([404, 405]).toContain(res.status);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.body.code).toBe('not_found');
    });
  });

  describe('API6 unrestricted access to sensitive business flows', () => {
    it('a test key cannot produce billable (metered) events', async () => {
      const res = await ingest(a.testKey, {
        events: [
          { eventName: 'Bill.me', isTestMode: false, eventId: randomUUID() },
          { eventName: 'Bill.me', eventId: randomUUID() },
        ],
      });
      expect(res.status).toBe(200);
      expect(res.body).toEqual(expect.objectContaining({ accepted: 2, metered: 0, testMode: true }));
    });

    it('key guessing is throttled per client address and key prefix, and never blocks a valid key', async () => {
      const guarded = await startTestApp({ AUTH_FAILURE_LIMIT: '5' });
      try {
        const tenant = await makeTenant(guarded.app);
        const guess = (i: number) =>
          request(guarded.http)
            .get('/api/v1/events')
            .query({ appId: tenant.appId })
            .set(bearer(`tly_api_${'A'.repeat(43)}${String(i).padStart(6, '0')}`));
        for (let i = 0; i < 5; i++) expectProblem(await guess(i), 401, 'invalid_key');
        const blocked = await guess(5);
        expectProblem(blocked, 429, 'too_many_auth_failures');
        expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
        const valid = await request(guarded.http)
          .get('/api/v1/events')
          .query({ appId: tenant.appId })
          .set(bearer(tenant.apiKey));
        expect(valid.status).toBe(200);
        // Counted per key prefix: the address's ingest keys (tly_live_) still work.
        const otherPrefix = await postIngest(guarded.http, tenant.liveKey, '{"events":[{"eventName":"x"}]}');
        expect(otherPrefix.status).toBe(200);
      } finally {
        await guarded.close();
      }
    });
  });

  describe('API7 server side request forgery', () => {
    it('no code path makes an outbound HTTP request from request data', () => {
      const files: string[] = [];
      const walk = (dir: string) => {
        for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
          const full = path.join(dir, entry.name);
          // The admin CLI serves no request: its one outbound call is `tally status`'s health probe
          // of the configured local service.
          if (entry.isDirectory()) {
            if (full !== path.join(__dirname, '../src/cli')) walk(full);
          } else if (/\.(ts|mjs)$/.test(entry.name) && !entry.name.endsWith('.spec.ts')) files.push(full);
        }
      };
      walk(path.join(__dirname, '../src'));
      expect(files.length).toBeGreaterThan(10);
      const outbound = /\bfetch\s*\(|\bhttps?\.(request|get)\s*\(|from ['"](axios|got|undici|node-fetch)['"]/;
      const offenders = files.filter((f) => outbound.test(fs.readFileSync(f, 'utf8')));
      expect(offenders).toEqual([]);
    });

    it('a URL in event data is stored as inert text', async () => {
      const eventId = `ssrf-${randomUUID()}`;
      const res = await ingest(a.liveKey, {
        events: [
          { eventName: 'Link.open', eventId, payload: { url: 'http://169.254.169.254/latest/meta-data/' } },
        ],
      });
      expect(res.status).toBe(200);
      const rows = (await t.db.query(
        `SELECT payload_json AS payload FROM events WHERE app_id = $1 AND event_id = $2`,
        [a.appId, eventId],
      )) as { payload: Record<string, unknown> }[];
      expect(rows[0].payload).toEqual({ url: 'http://169.254.169.254/latest/meta-data/' });
    });
  });

  describe('API8 security misconfiguration', () => {
    it.each([
      ['events', () => request(t.http).get('/api/v1/events').query({ appId: a.appId }).set(bearer(a.apiKey))],
      ['an error', () => request(t.http).get('/api/v1/events').query({ appId: a.appId })],
      ['ingest', () => ingest(a.liveKey, { events: [{ eventName: 'Headers.check' }] })],
    ])('%s carries the security headers and no fingerprint', async (_label, call) => {
      const res = await call();
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      // Plain HTTP: HSTS only over HTTPS (test/node-http-errors.e2e-spec.ts).
      expect(res.headers['strict-transport-security']).toBeUndefined();
      expect(res.headers['x-frame-options']).toBeDefined();
      expect(res.headers['content-security-policy']).toContain("default-src 'none'");
      expect(res.headers['x-powered-by']).toBeUndefined();
      expect(res.headers['x-request-id']).toBeDefined();
    });

    // Helmet's headers for the API, as a read answer carries them.
    const HELMET_HEADERS = [
      'content-security-policy',
      'cross-origin-opener-policy',
      'origin-agent-cluster',
      'referrer-policy',
      'x-content-type-options',
      'x-dns-prefetch-control',
      'x-download-options',
      'x-frame-options',
      'x-permitted-cross-domain-policies',
      'x-xss-protection',
    ];
    const pick = (headers: Record<string, unknown>, names: string[]) =>
      Object.fromEntries(names.map((name) => [name, headers[name]]));

    it.each([
      [
        'a 200, no Accept-Encoding',
        () => ingest(a.liveKey, { events: [{ eventName: 'Headers.same' }] }),
        200,
      ],
      [
        'a 200, Accept-Encoding: gzip',
        () =>
          request(t.http)
            .post('/api/ingest')
            .set(bearer(a.liveKey))
            .set('Accept-Encoding', 'gzip')
            .set('Content-Type', 'application/json')
            .send('{"events":[{"eventName":"Headers.same"}]}'),
        200,
      ],
      ['a 401', () => ingest('tly_live_unknown', { events: [{ eventName: 'Headers.same' }] }), 401],
    ])(
      "an ingest answer (%s) has the read answers' security headers, no-store, Vary and its CORS headers",
      async (_label, call, status) => {
        const read = await request(t.http)
          .get('/api/v1/events')
          .query({ appId: a.appId })
          .set(bearer(a.apiKey));
        expect(read.status).toBe(200);
        const res = await call();
        expect(res.status).toBe(status);
        expect(pick(res.headers, HELMET_HEADERS)).toEqual(pick(read.headers, HELMET_HEADERS));
        expect(Object.values(pick(res.headers, HELMET_HEADERS)).every((v) => typeof v === 'string')).toBe(
          true,
        );
        expect(res.headers['x-powered-by']).toBeUndefined();
        expect(res.headers['cache-control']).toBe('no-store');
        expect(res.headers['vary']).toBe('Accept-Encoding');
        expect(res.headers['access-control-allow-origin']).toBe('*');
        expect(res.headers['access-control-expose-headers']).toBe(
          'X-Request-Id,Retry-After,RateLimit-Limit,RateLimit-Remaining,RateLimit-Reset',
        );
      },
    );

    it('read endpoints send no CORS headers, even to a preflight', async () => {
      const get = await request(t.http)
        .get('/api/v1/events')
        .query({ appId: a.appId })
        .set('Origin', 'https://evil.example')
        .set(bearer(a.apiKey));
      expect(get.headers['access-control-allow-origin']).toBeUndefined();
      const preflight = await request(t.http)
        .options('/api/v1/events')
        .set('Origin', 'https://evil.example')
        .set('Access-Control-Request-Method', 'GET')
        .set('Access-Control-Request-Headers', 'authorization');
      expect(preflight.headers['access-control-allow-origin']).toBeUndefined();
      expect(preflight.headers['access-control-allow-headers']).toBeUndefined();
    });

    it('ingest allows any origin but never credentials', async () => {
      const preflight = await request(t.http)
        .options('/api/ingest')
        .set('Origin', 'https://app.example')
        .set('Access-Control-Request-Method', 'POST');
      expect(preflight.status).toBeLessThan(300);
      expect(preflight.headers['access-control-allow-origin']).toBe('*');
      expect(preflight.headers['access-control-allow-credentials']).toBeUndefined();
    });

    it('errors leak no stack trace, SQL or internals', async () => {
      const responses = await Promise.all([
        request(t.http).get('/api/v1/events').query({ appId: "x' OR 1=1 --" }).set(bearer(a.apiKey)),
        request(t.http)
          .get('/api/v1/events')
          .query({ appId: a.appId, from: "'; SELECT pg_sleep(1); --" })
          .set(bearer(a.apiKey)),
        request(t.http)
          .get('/api/v1/rollups')
          .query({ appId: a.appId, fromDate: '2026-02-30' })
          .set(bearer(a.apiKey)),
        postIngest(t.http, a.liveKey, '{"events":['),
        request(t.http).get('/nowhere/../../etc/passwd'),
      ]);
      for (const res of responses) {
        expect(res.status).toBeGreaterThanOrEqual(400);
        expect(res.status).toBeLessThan(500);
        expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(res.text).not.toMatch(
          /\bat \S+ \(|node_modules|QueryFailedError|syntax error at|\bSELECT\b.*\bFROM\b|\/work\//,
        );
      }
    });
  });

  describe('API8 injection: SQL through every query parameter', () => {
    const INJECTIONS = [
      "' OR '1'='1",
      "'; DROP TABLE events; --",
      '1; DELETE FROM keys WHERE true; --',
      "\\'; SELECT pg_sleep(5); --",
      "A.seen' UNION SELECT * FROM keys --",
      '$1',
      ':hash',
      '%',
      '_',
      '\u0000',
    ];
    const EVENT_PARAMS = [
      'eventName',
      'anonymousUserId',
      'sessionId',
      'from',
      'to',
      'testMode',
      'limit',
      'cursor',
    ];
    const ROLLUP_PARAMS = ['eventName', 'fromDate', 'toDate', 'range', 'testMode'];

    it.each([
      ['/api/v1/events', EVENT_PARAMS],
      ['/api/v1/rollups', ROLLUP_PARAMS],
    ])(
      '%s: every parameter treats SQL as data (200 with no foreign rows, or 400)',
      async (endpoint, params) => {
        const eventsBefore = await countEvents(t, a.appId);
        const keysBefore = ((await t.db.query('SELECT count(*)::int AS n FROM keys')) as { n: number }[])[0]
          .n;
        const unexpected: string[] = [];
        for (const param of [...params, 'appId']) {
          for (const value of INJECTIONS) {
            const query = { appId: a.appId, [param]: value };
            const res = await request(t.http).get(endpoint).query(query).set(bearer(a.apiKey));
            const ok =
              res.status === 200
                ? Array.isArray(res.body) &&
                  !res.text.includes('B.secret') &&
                  // A wildcard or a tautology must not widen a filter to other rows.
                  (!['eventName', 'anonymousUserId', 'sessionId'].includes(param) || res.body.length === 0)
                : [400, 403].includes(res.status) &&
                  /^application\/problem\+json/.test(res.headers['content-type']) &&
                  ['invalid_query', 'invalid_cursor', 'app_forbidden'].includes(res.body.code);
            if (!ok)
              unexpected.push(`${param}=${JSON.stringify(value)} → ${res.status} ${res.text.slice(0, 120)}`);
          }
        }
        expect(unexpected).toEqual([]);
        expect(await countEvents(t, a.appId)).toBe(eventsBefore);
        const keysAfter = ((await t.db.query('SELECT count(*)::int AS n FROM keys')) as { n: number }[])[0].n;
        expect(keysAfter).toBeGreaterThanOrEqual(keysBefore);
      },
    );
  });

  describe('API9 improper inventory management', () => {
    it('the published OpenAPI document lists exactly the API operations the service answers', async () => {
      const res = await request(t.http).get('/openapi.json');
      expect(res.status).toBe(200);
      expect(res.body.openapi).toMatch(/^3\.1/);
      const apiPaths = Object.keys(res.body.paths as Record<string, unknown>)
        .filter((p) => p.startsWith('/api'))
        .sort();
      expect(apiPaths).toEqual([
        '/api/ingest',
        '/api/posthog/batch',
        '/api/posthog/capture',
        '/api/posthog/e',
        '/api/posthog/i/v0/e',
        '/api/segment/v1/{endpoint}',
        '/api/v1/active-users',
        '/api/v1/breakdown',
        '/api/v1/deletions',
        '/api/v1/deletions/{id}',
        '/api/v1/events',
        '/api/v1/export',
        '/api/v1/key',
        '/api/v1/plan',
        '/api/v1/plan/check',
        '/api/v1/plan/quality',
        '/api/v1/quarantine',
        '/api/v1/quarantine/replay',
        '/api/v1/rollups',
      ]);
      expect(Object.keys(res.body.paths['/api/ingest'])).toEqual(['post']);
      expect(Object.keys(res.body.paths['/api/v1/deletions']).sort()).toEqual(['get', 'post']);
      expect(Object.keys(res.body.paths['/api/v1/deletions/{id}'])).toEqual(['get']);
      expect(Object.keys(res.body.paths['/api/v1/export'])).toEqual(['get']);
      expect(Object.keys(res.body.paths['/api/v1/key'])).toEqual(['get']);
      expect(Object.keys(res.body.paths['/api/v1/events'])).toEqual(['get']);
      expect(Object.keys(res.body.paths['/api/v1/rollups'])).toEqual(['get']);
      expect(Object.keys(res.body.paths['/api/v1/active-users'])).toEqual(['get']);
      expect(Object.keys(res.body.paths['/api/v1/breakdown'])).toEqual(['get']);
      expect(Object.keys(res.body.paths['/api/segment/v1/{endpoint}'])).toEqual(['post']);
      expect(Object.keys(res.body.paths['/api/posthog/batch'])).toEqual(['post']);
    });
  });

  describe('API10 unsafe consumption of APIs (client data is untrusted)', () => {
    it('prototype-pollution keys are stored as plain data and pollute nothing', async () => {
      const eventId = `proto-${randomUUID()}`;
      const body =
        '{"events":[{"eventName":"Proto.keys","eventId":"' +
        eventId +
        '","payload":{"__proto__":"p","constructor":"c","prototype":"x"},"__proto__":{"polluted":true}}],' +
        '"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}';
      const res = await postIngest(t.http, a.liveKey, body);
      expect(res.status).toBe(200);
      expect(res.body.accepted).toBe(1);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      expect((Object.prototype as unknown as Record<string, unknown>).polluted).toBeUndefined();
      const rows = (await t.db.query(
        `SELECT payload_json AS payload FROM events WHERE app_id = $1 AND event_id = $2`,
        [a.appId, eventId],
      )) as { payload: Record<string, unknown> }[];
      expect(rows).toHaveLength(1);
      expect(Object.entries(rows[0].payload).sort()).toEqual([
        ['__proto__', 'p'],
        ['constructor', 'c'],
        ['prototype', 'x'],
      ]);
    });
  });

  describe('secrets stay out of responses', () => {
    it('no error body or header echoes a presented key', async () => {
      const presented = [a.liveKey, a.apiKey, `${a.apiKey}x`, a.apiKey.slice(0, -1)];
      for (const key of presented) {
        const calls = [
          request(t.http).get('/api/v1/events').query({ appId: b.appId }).set(bearer(key)),
          request(t.http).get('/api/v1/rollups').query({ appId: 'nope' }).set(bearer(key)),
          postIngest(t.http, key, '{'),
        ];
        for (const res of await Promise.all(calls)) {
          expect(res.status).toBeGreaterThanOrEqual(400);
          expect(res.text).not.toContain(key.slice(8, 30));
          expect(JSON.stringify(res.headers)).not.toContain(key.slice(8, 30));
        }
      }
    });
  });
});
