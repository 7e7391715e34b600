import request from 'supertest';
import { bearer, makeApiKey, makeApp, makeTenant, postIngest } from './factories';
import { SeedEvent, seedEvents, shownEventIds } from './factories/events';
import { useTestApp } from './support/test-app';
import { expectProblem } from './support/problem';

const HOUR = 3_600_000;

describe('GET /api/v1/events', () => {
  const t = useTestApp({ AUTH_FAILURE_LIMIT: '1000', READ_RATE_REQUESTS: '100000' });
  let tenant: Awaited<ReturnType<typeof makeTenant>>;
  const base = Date.now() - 3 * HOUR;

  beforeAll(async () => {
    tenant = await makeTenant(t.app);
  });

  const list = (query: Record<string, string | number>, key = tenant.apiKey) =>
    request(t.http).get('/api/v1/events').query(query).set(bearer(key));

  describe('query validation: 400 invalid_query', () => {
    it('requires appId', async () => {
      const res = await request(t.http).get('/api/v1/events').set(bearer(tenant.apiKey));
      expectProblem(res, 400, 'invalid_query');
      expect(res.body.errors).toEqual([{ field: 'appId', code: 'required', message: expect.any(String) }]);
      const empty = await list({ appId: '' });
      expectProblem(empty, 400, 'invalid_query');
      expect(empty.body.errors[0]).toMatchObject({ field: 'appId', code: 'required' });
    });

    it.each([
      ['0', 'out_of_range'],
      ['-1', 'out_of_range'],
      ['1001', 'out_of_range'],
      ['abc', 'not_an_integer'],
      ['1.5', 'not_an_integer'],
      ['1e2', 'not_an_integer'],
      ['', 'not_an_integer'],
      [' 5', 'not_an_integer'],
    ])('limit=%j is refused (%s)', async (limit, code) => {
      const res = await list({ appId: tenant.appId, limit });
      expectProblem(res, 400, 'invalid_query');
      expect(res.body.errors).toEqual([{ field: 'limit', code, message: expect.stringMatching(/limit/) }]);
    });

    it('accepts limit 1 and 1000', async () => {
      expect((await list({ appId: tenant.appId, limit: 1 })).status).toBe(200);
      expect((await list({ appId: tenant.appId, limit: 1000 })).status).toBe(200);
    });

    it('refuses a repeated parameter', async () => {
      const res = await request(t.http)
        .get(`/api/v1/events?appId=${tenant.appId}&limit=1&limit=2`)
        .set(bearer(tenant.apiKey));
      expectProblem(res, 400, 'invalid_query');
      expect(res.body.errors).toEqual([{ field: 'limit', code: 'repeated', message: expect.any(String) }]);
    });

    it('refuses an unknown parameter, such as a misspelt filter', async () => {
      const res = await list({ appId: tenant.appId, event_name: 'App.opened' });
      expectProblem(res, 400, 'invalid_query');
      expect(res.body.errors).toEqual([
        { field: 'event_name', code: 'unknown_parameter', message: expect.any(String) },
      ]);
    });

    it.each([
      ['from', '2026-02-30'],
      ['from', 'yesterday'],
      ['from', '2026-11-21T10:00:00'],
      ['to', '2026-11-21T25:00:00Z'],
      ['to', '-5'],
      ['to', '99999999999999999'],
    ])('%s=%j is invalid_timestamp', async (field, value) => {
      const res = await list({ appId: tenant.appId, [field]: value });
      expectProblem(res, 400, 'invalid_query');
      expect(res.body.errors).toEqual([{ field, code: 'invalid_timestamp', message: expect.any(String) }]);
    });

    it('refuses from after to', async () => {
      const res = await list({ appId: tenant.appId, from: '2026-11-22', to: '2026-11-21' });
      expectProblem(res, 400, 'invalid_query');
      expect(res.body.errors).toEqual([
        { field: 'from', code: 'invalid_range', message: expect.any(String) },
      ]);
    });

    it('refuses an unknown testMode', async () => {
      const res = await list({ appId: tenant.appId, testMode: 'yes' });
      expectProblem(res, 400, 'invalid_query');
      expect(res.body.errors).toEqual([
        { field: 'testMode', code: 'invalid_value', message: expect.any(String) },
      ]);
    });

    it('refuses a filter longer than 200 characters', async () => {
      const res = await list({ appId: tenant.appId, eventName: 'x'.repeat(201) });
      expectProblem(res, 400, 'invalid_query');
      expect(res.body.errors).toEqual([
        { field: 'eventName', code: 'too_long', message: expect.any(String) },
      ]);
    });
  });

  describe('authentication', () => {
    it('401 invalid_key without a key, 401 wrong_key_type with an ingest key', async () => {
      const none = await request(t.http).get('/api/v1/events').query({ appId: tenant.appId });
      expectProblem(none, 401, 'invalid_key');
      expect(none.headers['www-authenticate']).toBe('Bearer realm="tally", error="invalid_token"');
      expectProblem(await list({ appId: tenant.appId }, tenant.liveKey), 401, 'wrong_key_type');
    });

    it('403 insufficient_scope for a rollups-only key, 403 app_forbidden for another app', async () => {
      const rollupsOnly = await makeApiKey(t.app, [tenant.appId], ['rollups:read']);
      const res = await list({ appId: tenant.appId }, rollupsOnly.key);
      expectProblem(res, 403, 'insufficient_scope');
      expect(res.headers['www-authenticate']).toBe(
        'Bearer realm="tally", error="insufficient_scope", scope="events:read"',
      );
      const other = await makeApp(t.app);
      expectProblem(await list({ appId: other.id }), 403, 'app_forbidden');
    });
  });

  describe('records', () => {
    it('returns every field, with null for absent values, times as epoch ms', async () => {
      const own = await makeTenant(t.app);
      const full: SeedEvent = {
        eventName: 'Checkout.completed',
        receivedAt: base + 1000,
        eventTime: base - 5000,
        ts: base - 4000,
        anonymousUserId: 'u-hash-1',
        sessionId: 's-1',
        eventId: 'e-1',
        platform: 'iOS',
        appVersion: '2.3.1',
        buildNumber: '451',
        osVersion: '18.1',
        deviceModel: 'iPhone16,2',
        locale: 'en-US',
        timezone: 'Europe/Berlin',
        floatValue: 9.99,
        payload: { plan: 'pro', seats: 3, trial: false },
      };
      const [fullId, bareId] = await shownEventIds(
        t.db,
        own.appId,
        await seedEvents(t.db, own.appId, [full, { eventName: 'App.opened', receivedAt: base }]),
      );
      const res = await list({ appId: own.appId }, own.apiKey);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.headers['link']).toBeUndefined();
      expect(res.headers['x-next-cursor']).toBeUndefined();
      expect(res.headers['ratelimit-limit']).toBe('100000');
      expect(res.body).toEqual([
        {
          id: fullId,
          appId: own.appId,
          eventName: 'Checkout.completed',
          anonymousUserId: 'u-hash-1',
          sessionId: 's-1',
          eventTime: base - 5000,
          timestamp: base - 4000,
          receivedAt: base + 1000,
          eventId: 'e-1',
          isTestMode: false,
          platform: 'iOS',
          appVersion: '2.3.1',
          buildNumber: '451',
          osVersion: '18.1',
          deviceModel: 'iPhone16,2',
          locale: 'en-US',
          timezone: 'Europe/Berlin',
          floatValue: 9.99,
          payload: { plan: 'pro', seats: 3, trial: false },
        },
        {
          id: bareId,
          appId: own.appId,
          eventName: 'App.opened',
          anonymousUserId: null,
          sessionId: null,
          eventTime: null,
          timestamp: base,
          receivedAt: base,
          eventId: null,
          isTestMode: false,
          platform: null,
          appVersion: null,
          buildNumber: null,
          osVersion: null,
          deviceModel: null,
          locale: null,
          timezone: null,
          floatValue: null,
          payload: null,
        },
      ]);
    });

    it('an upper-case appId reads the same app', async () => {
      const own = await makeTenant(t.app);
      await seedEvents(t.db, own.appId, [{ eventName: 'App.opened', receivedAt: base }]);
      const res = await list({ appId: own.appId.toUpperCase() }, own.apiKey);
      expect(res.status).toBe(200);
      expect(res.body).toHaveLength(1);
      expect(res.body[0].appId).toBe(own.appId);
    });
    it('gives back a payload stored now as sent, and one stored as jsonb by an earlier version as well', async () => {
      const own = await makeTenant(t.app);
      // Stored before payloads were kept as json: in the jsonb column, whose key order is
      // shorter keys first.
      await seedEvents(t.db, own.appId, [
        { eventName: 'Old.event', ts: base, receivedAt: base, payload: { alpha: 'a', zeta: 1 } },
      ]);
      const ingest = await postIngest(t.http, own.liveKey, {
        events: [
          { eventName: 'New.event', eventTime: base, eventId: 'p-1', payload: { alpha: 'a', zeta: 1 } },
        ],
      });
      expect(ingest.status).toBe(200);
      expect(ingest.body).toMatchObject({ accepted: 1 });

      const res = await request(t.http)
        .get('/api/v1/events')
        .query({ appId: own.appId })
        .set(bearer(own.apiKey));
      expect(res.status).toBe(200);
      const byName = Object.fromEntries(
        res.body.map((e: { eventName: string; payload: unknown }) => [e.eventName, e.payload]),
      );
      expect(byName).toEqual({ 'New.event': { alpha: 'a', zeta: 1 }, 'Old.event': { alpha: 'a', zeta: 1 } });
      // The key order of the answer's text: as sent for the new event, jsonb's for the old one.
      expect(res.text).toContain('"payload":{"alpha":"a","zeta":1}');
      expect(res.text).toContain('"payload":{"zeta":1,"alpha":"a"}');
    });
  });

  describe('paging', () => {
    let own: Awaited<ReturnType<typeof makeTenant>>;
    let ids: string[];
    let shown: string[];

    beforeAll(async () => {
      own = await makeTenant(t.app);
      // 2,600 events, many sharing a receive time, so the id tie-break is exercised; half of
      // them get microsecond offsets so that rows differ below the millisecond.
      const events: SeedEvent[] = Array.from({ length: 2600 }, (_, i) => ({
        eventName: i % 3 === 0 ? 'App.opened' : 'Screen.viewed',
        receivedAt: base + Math.floor(i / 7) * 10,
        anonymousUserId: `u-${i % 50}`,
      }));
      ids = await seedEvents(t.db, own.appId, events);
      shown = await shownEventIds(t.db, own.appId, ids);
      await t.db.query(
        // In UTC, with IMMUTABLE operators only, so that Citus runs it on a distributed table too.
        `UPDATE events
            SET received_at = ((received_at AT TIME ZONE 'UTC') + (id % 997) * interval '1 microsecond') AT TIME ZONE 'UTC'
          WHERE app_id = $1 AND id % 2 = 0`,
        [own.appId],
      );
    });

    async function pageThrough(query: Record<string, string | number>) {
      const seen: { id: string; receivedAt: number }[] = [];
      let cursor: string | undefined;
      let pages = 0;
      for (;;) {
        const res = await list(cursor ? { ...query, cursor } : query, own.apiKey);
        expect(res.status).toBe(200);
        pages++;
        seen.push(...res.body.map((e: { id: string; receivedAt: number }) => e));
        const next = res.headers['x-next-cursor'];
        if (!next) {
          expect(res.headers['link']).toBeUndefined();
          break;
        }
        const params = new URLSearchParams({ ...query, cursor: next } as Record<string, string>);
        expect(res.headers['link']).toBe(`</api/v1/events?${params.toString()}>; rel="next"`);
        expect(res.body).toHaveLength(Number(query.limit ?? 100));
        cursor = next;
      }
      return { seen, pages };
    }

    it.each([[1000], [333]])('limit %i: every event exactly once, newest first', async (limit) => {
      const { seen, pages } = await pageThrough({ appId: own.appId, limit });
      expect(pages).toBe(Math.ceil(2600 / limit));
      expect(seen).toHaveLength(2600);
      expect(new Set(seen.map((e) => e.id)).size).toBe(2600);
      expect(new Set(seen.map((e) => e.id))).toEqual(new Set(shown));
      const stored = (await t.db.query(
        `SELECT id::text AS id FROM events WHERE app_id = $1 ORDER BY received_at DESC, events.id DESC`,
        [own.appId],
      )) as { id: string }[];
      expect(seen.map((e) => e.id)).toEqual(
        await shownEventIds(
          t.db,
          own.appId,
          stored.map((r) => r.id),
        ),
      );
    });

    it('newer events arriving between pages do not shift the following pages', async () => {
      const first = await list({ appId: own.appId, limit: 500 }, own.apiKey);
      const cursor = first.headers['x-next-cursor'];
      const other = await makeTenant(t.app);
      await seedEvents(t.db, own.appId, [{ eventName: 'Late.arrival', receivedAt: Date.now() }]);
      const second = await list({ appId: own.appId, limit: 500, cursor }, own.apiKey);
      expect(second.status).toBe(200);
      const firstIds = new Set(first.body.map((e: { id: string }) => e.id));
      expect(second.body.filter((e: { id: string }) => firstIds.has(e.id))).toEqual([]);
      expect(second.body.map((e: { eventName: string }) => e.eventName)).not.toContain('Late.arrival');
      expect(other.appId).not.toBe(own.appId);
      await t.db.query(`DELETE FROM events WHERE app_id = $1 AND event_name = 'Late.arrival'`, [own.appId]);
    });

    it('orders ids numerically within one receive time, across a change in digit count', async () => {
      const crossing = await makeTenant(t.app);
      // Move the id sequence to just below the next power of ten, so one batch gets ids such as
      // 99998 … 100003 that sort differently as text and as numbers.
      const [{ last }] = (await t.db.query(`SELECT last_value::bigint AS last FROM events_id_seq`)) as {
        last: string;
      }[];
      const boundary = 10 ** String(last).length * 10;
      await t.db.query(`SELECT setval('events_id_seq', $1)`, [boundary - 4]);
      const at = Date.now() - HOUR;
      const seeded = await seedEvents(
        t.db,
        crossing.appId,
        Array.from({ length: 8 }, () => ({ eventName: 'Same.instant', receivedAt: at })),
      );
      expect(seeded.some((id) => id.length !== seeded[0].length)).toBe(true);
      const seen: string[] = [];
      let cursor: string | undefined;
      for (let i = 0; i < 10; i++) {
        const res = await list(
          cursor ? { appId: crossing.appId, limit: 3, cursor } : { appId: crossing.appId, limit: 3 },
          crossing.apiKey,
        );
        seen.push(...res.body.map((e: { id: string }) => e.id));
        cursor = res.headers['x-next-cursor'];
        if (!cursor) break;
      }
      const newestFirst = [...seeded].sort((a, b) => Number(b) - Number(a));
      expect(seen).toEqual(await shownEventIds(t.db, crossing.appId, newestFirst));
    });

    it('defaults to 100 rows', async () => {
      const res = await list({ appId: own.appId }, own.apiKey);
      expect(res.body).toHaveLength(100);
      expect(res.headers['x-next-cursor']).toEqual(expect.any(String));
    });

    it('400 invalid_cursor for a tampered, truncated, garbage or foreign cursor', async () => {
      const res = await list({ appId: own.appId, limit: 10 }, own.apiKey);
      const cursor: string = res.headers['x-next-cursor'];
      const flipped = cursor.slice(0, 5) + (cursor[5] === 'A' ? 'B' : 'A') + cursor.slice(6);
      for (const bad of [flipped, cursor.slice(0, -2), 'not-a-cursor', cursor + 'A', '']) {
        const r = await list({ appId: own.appId, limit: 10, cursor: bad }, own.apiKey);
        expectProblem(r, 400, 'invalid_cursor');
      }
      // Bound to its query: the same cursor is refused with another filter or another app.
      expectProblem(
        await list({ appId: own.appId, limit: 10, cursor, eventName: 'App.opened' }, own.apiKey),
        400,
        'invalid_cursor',
      );
      expectProblem(
        await list({ appId: own.appId, limit: 10, cursor, testMode: 'all' }, own.apiKey),
        400,
        'invalid_cursor',
      );
      const both = await makeApiKey(t.app, [own.appId, tenant.appId]);
      expectProblem(await list({ appId: tenant.appId, limit: 10, cursor }, both.key), 400, 'invalid_cursor');
      // A different limit is fine: the cursor marks a position, not a page size.
      const ok = await list({ appId: own.appId, limit: 25, cursor }, own.apiKey);
      expect(ok.status).toBe(200);
      expect(ok.body).toHaveLength(25);
    });
  });

  describe('filters', () => {
    let own: Awaited<ReturnType<typeof makeTenant>>;
    let stored: { id: string; e: SeedEvent }[];

    beforeAll(async () => {
      own = await makeTenant(t.app);
      const events: SeedEvent[] = [];
      for (let i = 0; i < 60; i++) {
        events.push({
          eventName: ['App.opened', 'Screen.viewed', 'Checkout.completed'][i % 3],
          receivedAt: base + i * 1000,
          eventTime: base - 10 * HOUR + i * 60_000,
          anonymousUserId: i % 4 === 0 ? null : `user-${i % 5}`,
          sessionId: `session-${i % 6}`,
          isTestMode: i % 10 === 0,
        });
      }
      const ids = await shownEventIds(t.db, own.appId, await seedEvents(t.db, own.appId, events));
      stored = ids.map((id, i) => ({ id, e: events[i] }));
      // Noise in another app that the filters must never reach.
      const other = await makeApp(t.app);
      await seedEvents(t.db, other.id, events);
    });

    const expected = (pred: (e: SeedEvent) => boolean) =>
      stored
        .filter((s) => pred(s.e))
        .sort((a, b) => b.e.receivedAt - a.e.receivedAt)
        .map((s) => s.id);
    const ids = async (query: Record<string, string | number>) => {
      const res = await list({ appId: own.appId, limit: 1000, ...query }, own.apiKey);
      expect(res.status).toBe(200);
      return res.body.map((e: { id: string }) => e.id);
    };

    it('testMode defaults to false: test events are left out', async () => {
      const got = await ids({});
      expect(got).toEqual(expected((e) => !e.isTestMode));
      expect(got.length).toBe(54);
    });

    it('testMode=true returns only test events, all returns both', async () => {
      expect(await ids({ testMode: 'true' })).toEqual(expected((e) => e.isTestMode === true));
      expect(await ids({ testMode: 'false' })).toEqual(expected((e) => !e.isTestMode));
      expect(await ids({ testMode: 'all' })).toEqual(expected(() => true));
    });

    it('eventName', async () => {
      const got = await ids({ eventName: 'Checkout.completed', testMode: 'all' });
      expect(got).toHaveLength(20);
      expect(got).toEqual(expected((e) => e.eventName === 'Checkout.completed'));
      expect(await ids({ eventName: 'checkout.completed' })).toEqual([]);
    });

    it('anonymousUserId', async () => {
      const got = await ids({ anonymousUserId: 'user-3' });
      expect(got.length).toBeGreaterThan(0);
      expect(got).toEqual(expected((e) => e.anonymousUserId === 'user-3' && !e.isTestMode));
    });

    it('sessionId', async () => {
      const got = await ids({ sessionId: 'session-2', testMode: 'all' });
      expect(got).toHaveLength(10);
      expect(got).toEqual(expected((e) => e.sessionId === 'session-2'));
    });

    it('from (inclusive) and to (exclusive) on the event time, as epoch ms or ISO-8601', async () => {
      const from = base - 10 * HOUR + 10 * 60_000;
      const to = base - 10 * HOUR + 30 * 60_000;
      const want = expected((e) => e.eventTime! >= from && e.eventTime! < to);
      expect(want).toHaveLength(20);
      expect(await ids({ from, to, testMode: 'all' })).toEqual(want);
      expect(
        await ids({ from: new Date(from).toISOString(), to: new Date(to).toISOString(), testMode: 'all' }),
      ).toEqual(want);
      const offset = new Date(from + 2 * HOUR).toISOString().replace('Z', '+02:00');
      expect(await ids({ from: offset, to, testMode: 'all' })).toEqual(want);
      expect(await ids({ from, testMode: 'all' })).toEqual(expected((e) => e.eventTime! >= from));
      expect(await ids({ to, testMode: 'all' })).toEqual(expected((e) => e.eventTime! < to));
    });

    it('filters combine', async () => {
      const from = base - 10 * HOUR + 20 * 60_000;
      const got = await ids({ eventName: 'App.opened', sessionId: 'session-0', from });
      expect(got.length).toBeGreaterThan(0);
      expect(got).toEqual(
        expected(
          (e) =>
            e.eventName === 'App.opened' &&
            e.sessionId === 'session-0' &&
            e.eventTime! >= from &&
            !e.isTestMode,
        ),
      );
    });

    it('pages through a filtered query', async () => {
      const first = await list({ appId: own.appId, eventName: 'Screen.viewed', limit: 7 }, own.apiKey);
      expect(first.body).toHaveLength(7);
      const second = await list(
        { appId: own.appId, eventName: 'Screen.viewed', limit: 7, cursor: first.headers['x-next-cursor'] },
        own.apiKey,
      );
      const got = [...first.body, ...second.body].map((e: { id: string }) => e.id);
      expect(got).toEqual(expected((e) => e.eventName === 'Screen.viewed' && !e.isTestMode).slice(0, 14));
    });
  });
});
