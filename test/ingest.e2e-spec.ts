import request from 'supertest';
import { bearer, makeTenant, postIngest } from './factories';
import { useTestApp } from './support/test-app';
import type { ErrorCode } from '@app/common/app-error';
import { expectProblem } from './support/problem';
import { DAY_MS as DAY } from '@app/common/time';

type Tenant = Awaited<ReturnType<typeof makeTenant>>;

interface StoredRow {
  event_name: string;
  event_id: string | null;
  anonymous_user_id: string | null;
  session_id: string | null;
  event_time: string | null;
  ts: Date;
  received_at: Date;
  is_test_mode: boolean;
  platform: string | null;
  app_version: string | null;
  build_number: string | null;
  os_version: string | null;
  device_model: string | null;
  locale: string | null;
  timezone: string | null;
  float_value: number | null;
  payload: Record<string, unknown> | null;
}

describe('POST /api/ingest', () => {
  const t = useTestApp({
    AUTH_FAILURE_LIMIT: '1000',
    INGEST_MAX_EVENTS: '50',
    INGEST_MAX_BYTES: '65536',
  });

  const post = (key: string, body: unknown) => postIngest(t.http, key, body);

  // Payloads are written to `payload_json`; `payload` holds those of events stored before it.
  const stored = async (tenant: Tenant): Promise<StoredRow[]> =>
    (
      (await t.db.query(`SELECT * FROM events WHERE app_id = $1 ORDER BY id`, [
        tenant.appId,
      ])) as (StoredRow & {
        payload_json: StoredRow['payload'];
      })[]
    ).map(({ payload_json, ...row }) => ({ ...row, payload: payload_json ?? row.payload }));
  const storedCount = async (tenant: Tenant) => (await stored(tenant)).length;
  const dirtyDays = async (tenant: Tenant) =>
    (
      (await t.db.query(`SELECT DISTINCT day::text AS day FROM rollup_dirty WHERE app_id = $1 ORDER BY 1`, [
        tenant.appId,
      ])) as { day: string }[]
    ).map((r) => r.day);

  describe('200: the batch metering result', () => {
    it('stores a valid batch and answers with the exact result body', async () => {
      const tenant = await makeTenant(t.app);
      const now = Date.now();
      const body = {
        events: [
          {
            eventName: 'Checkout.completed',
            anonymousUserId: 'u-1',
            sessionId: 's-1',
            eventTime: now - 60_000,
            eventId: 'e-1',
            isTestMode: false,
            platform: 'ios',
            appVersion: '2.4.1',
            buildNumber: '241',
            osVersion: '18.1',
            deviceModel: 'iPhone16,2',
            locale: 'en_US',
            timezone: 'Europe/Paris',
            floatValue: 9.99,
            payload: { plan: 'pro', seats: 3, trial: false, __proto__x: 'p' },
          },
          { eventName: 'App.opened', isTestMode: true },
        ],
      };
      const res = await post(tenant.liveKey, body);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      const payloadBytes = Buffer.byteLength(JSON.stringify(body));
      expect(res.body).toEqual({
        received: 2,
        accepted: 2,
        duplicates: 0,
        rejected: 0,
        // A live key is billed for every accepted event, its isTestMode:true event included.
        metered: 2,
        testMode: false,
        payloadBytes,
        serverTime: expect.any(Number),
        errors: [],
        errorCounts: {},
        warnings: [],
        warningCounts: {},
      });
      expect(Math.abs(res.body.serverTime - now)).toBeLessThan(10_000);
      expect(res.headers['ratelimit-limit']).toBe('100');
      expect(res.headers['ratelimit-remaining']).toEqual(expect.any(String));
      expect(res.headers['ratelimit-reset']).toEqual(expect.any(String));

      const rows = await stored(tenant);
      expect(rows).toHaveLength(2);
      expect(rows[0]).toMatchObject({
        event_name: 'Checkout.completed',
        event_id: 'e-1',
        anonymous_user_id: 'u-1',
        session_id: 's-1',
        event_time: String(now - 60_000),
        is_test_mode: false,
        platform: 'ios',
        app_version: '2.4.1',
        build_number: '241',
        os_version: '18.1',
        device_model: 'iPhone16,2',
        locale: 'en-US',
        timezone: 'Europe/Paris',
        float_value: 9.99,
        payload: { plan: 'pro', seats: 3, trial: false, __proto__x: 'p' },
      });
      expect(rows[0].ts.getTime()).toBe(now - 60_000);
      expect(rows[0].received_at.getTime()).toBe(res.body.serverTime);
      // Without eventTime, the event's time is the receive time.
      expect(rows[1]).toMatchObject({
        event_name: 'App.opened',
        event_time: null,
        is_test_mode: true,
        payload: null,
      });
      expect(rows[1].ts.getTime()).toBe(res.body.serverTime);
      expect(await dirtyDays(tenant)).toEqual(
        [
          ...new Set(
            [now - 60_000, res.body.serverTime].map((ms) => new Date(ms).toISOString().slice(0, 10)),
          ),
        ].sort(),
      );
    });

    it('accepts a charset parameter and keys such as __proto__ as plain payload data', async () => {
      const tenant = await makeTenant(t.app);
      const res = await request(t.http)
        .post('/api/ingest')
        .set(bearer(tenant.liveKey))
        .set('Content-Type', 'application/json; charset=UTF-8')
        .send('{"events":[{"eventName":"a","payload":{"__proto__":"x","constructor":1,"toString":true}}]}');
      expect(res.status).toBe(200);
      expect(res.body.accepted).toBe(1);
      const [row] = await stored(tenant);
      expect(row.payload).toEqual(JSON.parse('{"__proto__":"x","constructor":1,"toString":true}'));
    });

    // Array literals are built two ways: from JSON when no value needs a control-character
    // escape, element by element when one does (the tab; a backslash before b, f, n, r, t or u
    // takes the same path). Both must store text exactly.
    const TRICKY = ['say "hi"', 'back\\slash\\', '{a,b}', 'NULL', 'null', ' ', 'é😀', "it's", '\\"'];
    it.each([
      ['with no control characters', TRICKY],
      ['with a control character in every column', [...TRICKY, 'a\\b', '\\u0041', 'a\tb']],
    ])(
      'stores text exactly as sent: quotes, backslashes, braces, commas, emoji and "NULL" (%s)',
      async (_, tricky) => {
        const tenant = await makeTenant(t.app);
        // Names and ids refuse control characters (one rule with the read filters); the other
        // columns keep them.
        const events = tricky.map((s, i) => ({
          eventName: `n${i}${s.replace(/\t/g, ' ')}`,
          sessionId: s.replace(/\t/g, ' '),
          platform: s,
          payload: { [s]: s, q: `"${s}"` },
        }));
        const res = await post(tenant.liveKey, { events });
        expect(res.body).toMatchObject({ accepted: tricky.length, rejected: 0 });
        const rows = await stored(tenant);
        expect(rows.map((r) => [r.session_id, r.platform, r.payload])).toEqual(
          tricky.map((s) => [s.replace(/\t/g, ' '), s, { [s]: s, q: `"${s}"` }]),
        );
        expect(rows.map((r) => r.event_name)).toEqual(events.map((e) => e.eventName));
      },
    );

    it('answers 200 when every event is rejected, and stores nothing', async () => {
      const tenant = await makeTenant(t.app);
      const res = await post(tenant.liveKey, { events: [{ eventName: 5 }, {}] });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ received: 2, accepted: 0, duplicates: 0, rejected: 2, metered: 0 });
      expect(await storedCount(tenant)).toBe(0);
      expect(await dirtyDays(tenant)).toEqual([]);
    });

    it('forces test mode for a test key; test events are not metered', async () => {
      const tenant = await makeTenant(t.app);
      const res = await post(tenant.testKey, {
        events: [{ eventName: 'a', isTestMode: false }, { eventName: 'b' }],
      });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ received: 2, accepted: 2, metered: 0, testMode: true });
      const rows = await stored(tenant);
      expect(rows.map((r) => r.is_test_mode)).toEqual([true, true]);
    });
  });

  describe('per-event errors: the event is rejected, the rest is stored', () => {
    const now = Date.now();
    const cases: [string, Record<string, unknown> | unknown, string, string][] = [
      ['missing_field', {}, 'eventName', 'missing_field'],
      ['invalid_type', { eventName: 'a', buildNumber: 241 }, 'buildNumber', 'invalid_type'],
      ['invalid_type (not an object)', 'App.opened', 'event', 'invalid_type'],
      ['invalid_value', { eventName: 'a', eventTime: -1 }, 'eventTime', 'invalid_value'],
      ['invalid_value (control character)', { eventName: 'a\u0007' }, 'eventName', 'invalid_value'],
      ['too_long', { eventName: 'x'.repeat(201) }, 'eventName', 'too_long'],
      [
        'too_many_keys',
        { eventName: 'a', payload: Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`k${i}`, i])) },
        'payload',
        'too_many_keys',
      ],
      ['nested_value', { eventName: 'a', payload: { plan: { id: 1 } } }, 'payload.plan', 'nested_value'],
      [
        'event_too_large',
        {
          eventName: 'a',
          payload: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${i}`, 'x'.repeat(1000)])),
        },
        'event',
        'event_too_large',
      ],
      ['event_too_old', { eventName: 'a', eventTime: now - 31 * DAY }, 'eventTime', 'event_too_old'],
      ['unstorable_value (NUL)', { eventName: 'a', sessionId: 's\u0000' }, 'sessionId', 'unstorable_value'],
      [
        'unstorable_value (NUL in payload)',
        { eventName: 'a', payload: { k: 'v\u0000' } },
        'payload.k',
        'unstorable_value',
      ],
    ];

    it.each(cases)('%s', async (_label, bad, field, code) => {
      const tenant = await makeTenant(t.app);
      const res = await post(tenant.liveKey, {
        events: [{ eventName: 'Good.first' }, bad, { eventName: 'Good.last', eventId: 'g-2' }],
      });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ received: 3, accepted: 2, duplicates: 0, rejected: 1, metered: 2 });
      expect(res.body.errors).toContainEqual({ index: 1, field, code, message: expect.any(String) });
      expect(res.body.errors.every((e: { index: number }) => e.index === 1)).toBe(true);
      expect((await stored(tenant)).map((r) => r.event_name)).toEqual(['Good.first', 'Good.last']);
    });

    it('unstorable_value for an unpaired surrogate (sent as a JSON escape)', async () => {
      const tenant = await makeTenant(t.app);
      const res = await post(
        tenant.liveKey,
        '{"events":[{"eventName":"a","eventId":"e-1","payload":{"k":"\\ud800"}}]}',
      );
      expect(res.status).toBe(200);
      expect(res.body.errors).toEqual([
        {
          index: 0,
          eventId: 'e-1',
          field: 'payload.k',
          code: 'unstorable_value',
          message: expect.any(String),
        },
      ]);
      expect(await storedCount(tenant)).toBe(0);
    });

    it('invalid_value for a number too large to be finite', async () => {
      const tenant = await makeTenant(t.app);
      const res = await post(tenant.liveKey, '{"events":[{"eventName":"a","floatValue":1e400}]}');
      expect(res.body.errors).toEqual([
        { index: 0, field: 'floatValue', code: 'invalid_value', message: expect.any(String) },
      ]);
      expect(await storedCount(tenant)).toBe(0);
    });
  });

  describe('warnings: the event is stored, changed as the warning says', () => {
    it('ignored_field, invalid_format and null_value_dropped', async () => {
      const tenant = await makeTenant(t.app);
      const res = await post(tenant.liveKey, {
        events: [
          {
            eventName: 'a',
            eventId: 'w-1',
            colour: 'red',
            locale: 'not a locale',
            timezone: 'Mars/Base',
            payload: { a: 1, b: null },
          },
        ],
      });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ accepted: 1, rejected: 0, errors: [] });
      const codes = res.body.warnings.map((w: { field: string; code: string }) => `${w.field}:${w.code}`);
      expect(codes.sort()).toEqual([
        'colour:ignored_field',
        'locale:invalid_format',
        'payload.b:null_value_dropped',
        'timezone:invalid_format',
      ]);
      expect(
        res.body.warnings.every(
          (w: { index: number; eventId: string }) => w.index === 0 && w.eventId === 'w-1',
        ),
      ).toBe(true);
      const [row] = await stored(tenant);
      expect(row).toMatchObject({ locale: null, timezone: null, payload: { a: 1 } });
    });

    it('clock_skew_corrected: a client clock an hour behind', async () => {
      const tenant = await makeTenant(t.app);
      const now = Date.now();
      const hour = 3_600_000;
      const res = await post(tenant.liveKey, {
        sentAt: now - hour,
        events: [{ eventName: 'a', eventTime: now - hour - 5000 }, { eventName: 'b' }],
      });
      expect(res.status).toBe(200);
      expect(res.body.warnings).toEqual([
        { index: 0, field: 'eventTime', code: 'clock_skew_corrected', message: expect.any(String) },
      ]);
      const rows = await stored(tenant);
      expect(rows[0].event_time).toBe(String(now - hour - 5000));
      // Corrected by the measured offset (receive time - sentAt), which is about an hour.
      expect(Math.abs(rows[0].ts.getTime() - (now - 5000))).toBeLessThan(5000);
    });

    it('no correction within 5 minutes of skew', async () => {
      const tenant = await makeTenant(t.app);
      const now = Date.now();
      const res = await post(tenant.liveKey, {
        sentAt: now - 60_000,
        events: [{ eventName: 'a', eventTime: now - 1000 }],
      });
      expect(res.body.warnings).toEqual([]);
      expect((await stored(tenant))[0].ts.getTime()).toBe(now - 1000);
    });

    it('future_time_clamped: more than 10 minutes ahead becomes the receive time', async () => {
      const tenant = await makeTenant(t.app);
      const sent = Date.now() + 3 * 3_600_000;
      const res = await post(tenant.liveKey, { events: [{ eventName: 'a', eventTime: sent }] });
      expect(res.body.warnings).toEqual([
        { index: 0, field: 'eventTime', code: 'future_time_clamped', message: expect.any(String) },
      ]);
      const [row] = await stored(tenant);
      expect(row.event_time).toBe(String(sent));
      expect(row.ts.getTime()).toBe(res.body.serverTime);
    });

    it('unlinked: privacyMode "unlinked" strips the user and session ids; other values are ignored', async () => {
      const tenant = await makeTenant(t.app);
      const res = await post(tenant.liveKey, {
        events: [
          { eventName: 'a', anonymousUserId: 'u-1', sessionId: 's-1', privacyMode: 'unlinked' },
          { eventName: 'b', anonymousUserId: 'u-2', sessionId: 's-2', privacyMode: 'private' },
        ],
      });
      expect(res.body.warnings).toEqual([
        { index: 0, field: 'privacyMode', code: 'unlinked', message: expect.any(String) },
        { index: 1, field: 'privacyMode', code: 'ignored_field', message: expect.any(String) },
      ]);
      const rows = await stored(tenant);
      expect(rows.map((r) => [r.anonymous_user_id, r.session_id])).toEqual([
        [null, null],
        ['u-2', 's-2'],
      ]);
    });

    it('pii_redacted and pii_pseudonymised under the default policy (redact)', async () => {
      const tenant = await makeTenant(t.app);
      const res = await post(tenant.liveKey, {
        events: [
          {
            eventName: 'a',
            anonymousUserId: 'Ann@Example.com',
            payload: {
              note: 'mail ann@example.com',
              phone: '+44 20 7946 0958',
              card: '4111-1111-1111-1111',
              ok: 'order 12345',
            },
          },
          { eventName: 'b', anonymousUserId: 'ann@example.com' },
        ],
      });
      expect(res.status).toBe(200);
      const codes = res.body.warnings.map(
        (w: { index: number; field: string; code: string }) => `${w.index}:${w.field}:${w.code}`,
      );
      expect(codes.sort()).toEqual([
        '0:anonymousUserId:pii_pseudonymised',
        '0:payload.card:pii_redacted',
        '0:payload.note:pii_redacted',
        '0:payload.phone:pii_redacted',
        '1:anonymousUserId:pii_pseudonymised',
      ]);
      const rows = await stored(tenant);
      expect(rows[0].payload).toEqual({
        note: '[redacted]',
        phone: '[redacted]',
        card: '[redacted]',
        ok: 'order 12345',
      });
      expect(rows[0].anonymous_user_id).toMatch(/^hmac:[0-9a-f]{64}$/);
      // A stable pseudonym: the same person maps to the same id, and the address is never stored.
      expect(rows[1].anonymous_user_id).toBe(rows[0].anonymous_user_id);
      // Whole fragments with their separators: a pseudonym's hex digits may hold any digit run.
      const raw = JSON.stringify(rows);
      expect(raw).not.toMatch(/example\.com|7946 0958|4111-1111/);
    });

    it('the pseudonym is keyed per app', async () => {
      const a = await makeTenant(t.app);
      const b = await makeTenant(t.app);
      await post(a.liveKey, { events: [{ eventName: 'x', anonymousUserId: '+1 415 555 0123' }] });
      await post(b.liveKey, { events: [{ eventName: 'x', anonymousUserId: '+1 415 555 0123' }] });
      const [ra] = await stored(a);
      const [rb] = await stored(b);
      expect(ra.anonymous_user_id).toMatch(/^hmac:/);
      expect(rb.anonymous_user_id).toMatch(/^hmac:/);
      expect(ra.anonymous_user_id).not.toBe(rb.anonymous_user_id);
    });
  });

  describe('dedup on (app, eventId)', () => {
    it('within a batch: the first copy wins, repeats are counted', async () => {
      const tenant = await makeTenant(t.app);
      const res = await post(tenant.liveKey, {
        events: [
          { eventName: 'first', eventId: 'd-1' },
          { eventName: 'second', eventId: 'd-1' },
          { eventName: 'bad', eventId: 'd-2', eventTime: 'x' },
          { eventName: 'after-bad', eventId: 'd-2' },
          { eventName: 'no-id' },
          { eventName: 'no-id' },
        ],
      });
      expect(res.body).toMatchObject({ received: 6, accepted: 4, duplicates: 1, rejected: 1, metered: 4 });
      expect((await stored(tenant)).map((r) => r.event_name)).toEqual([
        'first',
        'after-bad',
        'no-id',
        'no-id',
      ]);
    });

    it('across batches: a retried batch stores nothing new', async () => {
      const tenant = await makeTenant(t.app);
      const batch = {
        events: [
          { eventName: 'a', eventId: 'r-1' },
          { eventName: 'b', eventId: 'r-2' },
        ],
      };
      expect((await post(tenant.liveKey, batch)).body).toMatchObject({
        accepted: 2,
        duplicates: 0,
        metered: 2,
      });
      const again = await post(tenant.liveKey, {
        events: [...batch.events, { eventName: 'c', eventId: 'r-3' }],
      });
      expect(again.body).toMatchObject({ received: 3, accepted: 1, duplicates: 2, rejected: 0, metered: 1 });
      expect((await stored(tenant)).map((r) => r.event_id)).toEqual(['r-1', 'r-2', 'r-3']);
    });

    it('is per app: the same eventId in two apps is two events', async () => {
      const a = await makeTenant(t.app);
      const b = await makeTenant(t.app);
      const batch = { events: [{ eventName: 'a', eventId: 'shared' }] };
      expect((await post(a.liveKey, batch)).body.accepted).toBe(1);
      expect((await post(b.liveKey, batch)).body.accepted).toBe(1);
      expect(await storedCount(a)).toBe(1);
      expect(await storedCount(b)).toBe(1);
    });

    it('two identical batches sent concurrently store exactly one copy', async () => {
      const tenant = await makeTenant(t.app);
      const events = Array.from({ length: 40 }, (_, i) => ({ eventName: 'c', eventId: `c-${i}` }));
      const results = await Promise.all([1, 2, 3].map(() => post(tenant.liveKey, { events })));
      expect(results.map((r) => r.status)).toEqual([200, 200, 200]);
      const accepted = results.reduce((n, r) => n + r.body.accepted, 0);
      const duplicates = results.reduce((n, r) => n + r.body.duplicates, 0);
      expect(accepted).toBe(40);
      expect(duplicates).toBe(80);
      const rows = await stored(tenant);
      expect(rows).toHaveLength(40);
      expect(new Set(rows.map((r) => r.event_id)).size).toBe(40);
    });

    it('a dedup record older than the window no longer blocks the id', async () => {
      const tenant = await makeTenant(t.app);
      await post(tenant.liveKey, { events: [{ eventName: 'a', eventId: 'old-1' }] });
      await t.db.query(`UPDATE event_dedup SET seen_at = now() - interval '31 days' WHERE app_id = $1`, [
        tenant.appId,
      ]);
      const res = await post(tenant.liveKey, { events: [{ eventName: 'a', eventId: 'old-1' }] });
      expect(res.body).toMatchObject({ accepted: 1, duplicates: 0 });
      expect(await storedCount(tenant)).toBe(2);
    });
  });

  describe('400: envelope errors store nothing', () => {
    it.each([
      ['a body that is not JSON', '{"events": [', 'invalid_json', undefined],
      ['an empty body', '', 'invalid_json', undefined],
      ['a JSON array', '[{"eventName":"a"}]', 'invalid_body', { field: 'body', code: 'invalid_type' }],
      ['a JSON string', '"hello"', 'invalid_body', { field: 'body', code: 'invalid_type' }],
      ['null', 'null', 'invalid_body', { field: 'body', code: 'invalid_type' }],
      ['events missing', '{"batch":[]}', 'invalid_body', { field: 'events', code: 'missing_field' }],
      [
        'events not an array',
        '{"events":{"eventName":"a"}}',
        'invalid_body',
        { field: 'events', code: 'invalid_type' },
      ],
      ['events empty', '{"events":[]}', 'invalid_body', { field: 'events', code: 'invalid_value' }],
      [
        'sentAt not a number',
        '{"events":[{"eventName":"a"}],"sentAt":"now"}',
        'invalid_body',
        { field: 'sentAt', code: 'invalid_type' },
      ],
      [
        'sentAt negative',
        '{"events":[{"eventName":"a"}],"sentAt":-5}',
        'invalid_body',
        { field: 'sentAt', code: 'invalid_value' },
      ],
    ])('%s', async (_label, body, code, fieldError) => {
      const tenant = await makeTenant(t.app);
      const res = await post(tenant.liveKey, body);
      expectProblem(res, 400, code as ErrorCode);
      if (fieldError) expect(res.body.errors).toEqual([{ ...fieldError, message: expect.any(String) }]);
      else expect(res.body.errors).toBeUndefined();
      expect(await storedCount(tenant)).toBe(0);
    });

    it('invalid_json for a body that is not UTF-8', async () => {
      const tenant = await makeTenant(t.app);
      const req = request(t.http)
        .post('/api/ingest')
        .set(bearer(tenant.liveKey))
        .set('Content-Type', 'application/json');
      // Written raw: superagent would JSON-encode a Buffer passed to send().
      req.write(
        Buffer.concat([
          Buffer.from('{"events":[{"eventName":"'),
          Buffer.from([0xff, 0xfe]),
          Buffer.from('"}]}'),
        ]),
      );
      const res = await req;
      expectProblem(res, 400, 'invalid_json');
      expect(await storedCount(tenant)).toBe(0);
    });
  });

  describe('401', () => {
    it('an unknown key is refused before the body is read', async () => {
      const res = await post('tly_live_' + 'A'.repeat(49), { events: [{ eventName: 'a' }] });
      expectProblem(res, 401, 'invalid_key');
      expect(res.headers['www-authenticate']).toBe('Bearer realm="tally", error="invalid_token"');
    });

    it('an API key is the wrong kind of key', async () => {
      const tenant = await makeTenant(t.app);
      const res = await post(tenant.apiKey, { events: [{ eventName: 'a' }] });
      expectProblem(res, 401, 'wrong_key_type');
      expect(await storedCount(tenant)).toBe(0);
    });
  });

  describe('413: too large, nothing stored', () => {
    it('more events than INGEST_MAX_EVENTS', async () => {
      const tenant = await makeTenant(t.app);
      const body = { events: Array.from({ length: 51 }, () => ({ eventName: 'a' })) };
      const res = await post(tenant.liveKey, body);
      expectProblem(res, 413, 'payload_too_large');
      expect(res.body).toMatchObject({
        limitEvents: 50,
        limitBytes: 65536,
        receivedEvents: 51,
        receivedBytes: Buffer.byteLength(JSON.stringify(body)),
      });
      expect(await storedCount(tenant)).toBe(0);
    });

    it('a body over INGEST_MAX_BYTES', async () => {
      const tenant = await makeTenant(t.app);
      const body = JSON.stringify({ events: [{ eventName: 'a', payload: { pad: 'x'.repeat(70_000) } }] });
      const res = await post(tenant.liveKey, body);
      expectProblem(res, 413, 'payload_too_large');
      expect(res.body).toMatchObject({ limitEvents: 50, limitBytes: 65536, receivedEvents: null });
      expect(res.body.receivedBytes).toBeGreaterThan(65536);
      expect(await storedCount(tenant)).toBe(0);
    });

    it('a chunked body over INGEST_MAX_BYTES (no Content-Length)', async () => {
      const tenant = await makeTenant(t.app);
      const req = request(t.http)
        .post('/api/ingest')
        .set(bearer(tenant.liveKey))
        .set('Content-Type', 'application/json')
        .set('Transfer-Encoding', 'chunked');
      const body = JSON.stringify({ events: [{ eventName: 'a', payload: { pad: 'x'.repeat(70_000) } }] });
      for (let i = 0; i < body.length; i += 16_384) req.write(body.slice(i, i + 16_384));
      const res = await req;
      expectProblem(res, 413, 'payload_too_large');
      expect(res.body.receivedBytes).toBeGreaterThan(65536);
      expect(await storedCount(tenant)).toBe(0);
    });
  });

  describe('415', () => {
    it.each([
      ['no Content-Type', undefined],
      ['text/plain', 'text/plain'],
      ['form data', 'application/x-www-form-urlencoded'],
      ['a non-UTF-8 charset', 'application/json; charset=latin1'],
    ])('unsupported_media_type: %s', async (_label, contentType) => {
      const tenant = await makeTenant(t.app);
      const req = request(t.http).post('/api/ingest').set(bearer(tenant.liveKey));
      if (contentType) req.set('Content-Type', contentType);
      req.write('{"events":[{"eventName":"a"}]}');
      const res = await req;
      expectProblem(res, 415, 'unsupported_media_type');
      expect(await storedCount(tenant)).toBe(0);
    });

    it.each(['br', 'deflate', 'gzip, gzip', 'compress'])('unsupported_encoding: %s', async (encoding) => {
      const tenant = await makeTenant(t.app);
      const res = await request(t.http)
        .post('/api/ingest')
        .set(bearer(tenant.liveKey))
        .set('Content-Type', 'application/json')
        .set('Content-Encoding', encoding)
        .send('{"events":[{"eventName":"a"}]}');
      expectProblem(res, 415, 'unsupported_encoding');
      expect(res.headers['accept-encoding']).toBe('gzip, identity');
      expect(await storedCount(tenant)).toBe(0);
    });
  });

  describe('CORS', () => {
    it('ingest answers a preflight from any origin', async () => {
      const res = await request(t.http)
        .options('/api/ingest')
        .set('Origin', 'https://shop.example')
        .set('Access-Control-Request-Method', 'POST')
        .set('Access-Control-Request-Headers', 'authorization, content-type, content-encoding');
      expect(res.status).toBe(204);
      expect(res.headers['access-control-allow-origin']).toBe('*');
      expect(res.headers['access-control-allow-methods']).toContain('POST');
      expect(res.headers['access-control-allow-headers']?.toLowerCase()).toContain('authorization');
      expect(res.headers['access-control-allow-headers']?.toLowerCase()).toContain('content-encoding');
    });

    it('an ingest response carries the CORS header; a read endpoint carries none', async () => {
      const tenant = await makeTenant(t.app);
      const ingest = await request(t.http)
        .post('/api/ingest')
        .set('Origin', 'https://shop.example')
        .set(bearer(tenant.liveKey))
        .set('Content-Type', 'application/json')
        .send('{"events":[{"eventName":"a"}]}');
      expect(ingest.status).toBe(200);
      expect(ingest.headers['access-control-allow-origin']).toBe('*');
      expect(await storedCount(tenant)).toBe(1);

      const preflight = await request(t.http)
        .options('/api/v1/events')
        .set('Origin', 'https://shop.example')
        .set('Access-Control-Request-Method', 'GET');
      expect(preflight.headers['access-control-allow-origin']).toBeUndefined();
      const read = await request(t.http)
        .get('/api/v1/events')
        .query({ appId: tenant.appId })
        .set('Origin', 'https://shop.example')
        .set(bearer(tenant.apiKey));
      expect(read.headers['access-control-allow-origin']).toBeUndefined();
    });
  });
});
