import request from 'supertest';
import { SchedulerRegistry } from '@nestjs/schedule';
import { RollupsService } from '@app/rollups/rollups.service';
import { ROLLUP_LOCK_ID } from '@app/rollups/rollup-computation.repository';
import { ROLLUP_INTERVAL_NAME } from '@app/rollups/rollups.scheduler';
import { bearer, makeApiKey, makeApp, makeTenant } from './factories';
import { SeedEvent, seedEvents } from './factories/events';
import { startTestApp, useTestApp } from './support/test-app';
import { expectProblem } from './support/problem';
import { DAY_MS as DAY, utcDateString as dayOf, utcDayStart as startOf } from '@app/common/time';

interface MixEvent {
  eventName: string;
  ts: number;
  anonymousUserId?: string;
  sessionId?: string;
  isTestMode: boolean;
  floatValue?: number;
}

/** The rollups of a set of stored events, computed here independently of the SQL. */
function expectedRollups(appId: string, events: MixEvent[]) {
  const groups = new Map<string, MixEvent[]>();
  for (const e of events) {
    for (const name of ['', e.eventName]) {
      const key = JSON.stringify([dayOf(e.ts), name, e.isTestMode]);
      groups.set(key, [...(groups.get(key) ?? []), e]);
    }
  }
  return [...groups.entries()]
    .map(([key, rows]) => {
      const [date, name, isTestMode] = JSON.parse(key) as [string, string, boolean];
      const values = rows.map((r) => r.floatValue).filter((v): v is number => v !== undefined);
      const sum = values.reduce((a, b) => a + b, 0);
      return {
        appId,
        date,
        eventName: name === '' ? null : name,
        isTestMode,
        events: rows.length,
        uniqueUsers: new Set(rows.map((r) => r.anonymousUserId).filter((u) => u !== undefined)).size,
        uniqueSessions: new Set(rows.map((r) => r.sessionId).filter((s) => s !== undefined)).size,
        floatValue: values.length
          ? {
              count: values.length,
              sum: expect.closeTo(sum, 6),
              min: Math.min(...values),
              max: Math.max(...values),
              avg: expect.closeTo(sum / values.length, 6),
            }
          : null,
        final: expect.any(Boolean),
        computedAt: expect.any(Number),
        timezone: 'UTC',
        sortKey: [date, name, isTestMode ? 1 : 0] as const,
      };
    })
    .sort((a, b) =>
      a.sortKey[0] !== b.sortKey[0]
        ? a.sortKey[0] < b.sortKey[0]
          ? -1
          : 1
        : a.sortKey[1] !== b.sortKey[1]
          ? a.sortKey[1] < b.sortKey[1]
            ? -1
            : 1
          : a.sortKey[2] - b.sortKey[2],
    )
    .map(({ sortKey: _sortKey, ...row }) => row);
}

/** A deterministic mix over several days: test events, null user ids, with and without floatValue. */
function makeMix(seed: number, days: number[], count: number): MixEvent[] {
  let state = seed;
  const next = () => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    return state / 2_147_483_648;
  };
  const names = ['App.opened', 'Screen.viewed', 'Checkout.completed', 'Search.performed'];
  return Array.from({ length: count }, (_, i) => {
    const day = days[i % days.length];
    const e: MixEvent = {
      eventName: names[Math.floor(next() * names.length)],
      ts: day + Math.floor(next() * 60) * 60_000 + i,
      isTestMode: next() < 0.2,
    };
    if (next() < 0.8) e.anonymousUserId = `user-${Math.floor(next() * 25)}`;
    if (next() < 0.9) e.sessionId = `session-${Math.floor(next() * 40)}`;
    if (next() < 0.5) e.floatValue = Math.round(next() * 10_000) / 100;
    return e;
  });
}

const toSeed = (e: MixEvent): SeedEvent => ({ ...e, eventTime: e.ts, receivedAt: Date.now() });

describe('rollups', () => {
  const t = useTestApp({ AUTH_FAILURE_LIMIT: '1000', READ_RATE_REQUESTS: '100000' });
  let tenant: Awaited<ReturnType<typeof makeTenant>>;
  let service: RollupsService;
  const now = Date.now();
  const today = dayOf(now);
  // Whole past days inside the ingest window, and today up to a few minutes ago.
  const pastDays = [4, 3, 2, 1].map((n) => startOf(now) - n * DAY);
  const todayStart = Math.max(startOf(now), now - 3_600_000 - 10 * 60_000);

  beforeAll(async () => {
    tenant = await makeTenant(t.app);
    service = t.app.get(RollupsService);
  });

  const rollups = (query: Record<string, string | number>, key = tenant.apiKey) =>
    request(t.http).get('/api/v1/rollups').query(query).set(bearer(key));

  describe('query validation: 400 invalid_query', () => {
    it('requires appId', async () => {
      const res = await request(t.http).get('/api/v1/rollups').set(bearer(tenant.apiKey));
      expectProblem(res, 400, 'invalid_query');
      expect(res.body.errors).toEqual([{ field: 'appId', code: 'required', message: expect.any(String) }]);
    });

    it.each([
      ['fromDate', '2026-02-30'],
      ['fromDate', '2025-02-29'],
      ['fromDate', '2026-13-01'],
      ['fromDate', '2026-1-05'],
      ['fromDate', 'yesterday'],
      ['toDate', '2026-04-31'],
      ['toDate', '2026-11-21T00:00:00Z'],
      ['toDate', '0999-01-01'],
    ])('%s=%s is invalid_date', async (field, value) => {
      const res = await rollups({ appId: tenant.appId, [field]: value });
      expectProblem(res, 400, 'invalid_query');
      expect(res.body.errors).toEqual([{ field, code: 'invalid_date', message: expect.any(String) }]);
    });

    it.each([['0d'], ['367d'], ['1000d'], ['7'], ['d'], ['1.5d'], ['-1d'], ['7w'], ['']])(
      'range=%j is refused',
      async (range) => {
        const res = await rollups({ appId: tenant.appId, range });
        expectProblem(res, 400, 'invalid_query');
        expect(res.body.errors).toEqual([
          {
            field: 'range',
            code: expect.stringMatching(/^(invalid_format|out_of_range)$/),
            message: expect.any(String),
          },
        ]);
      },
    );

    it('range together with fromDate or toDate is a conflict', async () => {
      for (const extra of [{ fromDate: '2026-11-01' }, { toDate: '2026-11-01' }] as Record<
        string,
        string
      >[]) {
        const res = await rollups({ appId: tenant.appId, range: '7d', ...extra });
        expectProblem(res, 400, 'invalid_query');
        expect(res.body.errors).toEqual([{ field: 'range', code: 'conflict', message: expect.any(String) }]);
      }
    });

    it('a span over 366 days is refused; exactly 366 is accepted', async () => {
      const res = await rollups({ appId: tenant.appId, fromDate: '2025-01-01', toDate: '2026-01-02' });
      expectProblem(res, 400, 'invalid_query');
      expect(res.body.errors).toEqual([
        { field: 'fromDate', code: 'span_too_long', message: expect.any(String) },
      ]);
      const ok = await rollups({ appId: tenant.appId, fromDate: '2025-01-01', toDate: '2026-01-01' });
      expect(ok.status).toBe(200);
      expect((await rollups({ appId: tenant.appId, range: '366d' })).status).toBe(200);
      // fromDate alone runs to today: far in the past, that is too long as well.
      expectProblem(await rollups({ appId: tenant.appId, fromDate: '2020-01-01' }), 400, 'invalid_query');
    });

    it('fromDate after toDate is refused, including a future fromDate with the default toDate', async () => {
      const queries: Record<string, string>[] = [
        { fromDate: '2026-11-02', toDate: '2026-11-01' },
        { fromDate: dayOf(now + 2 * DAY) },
      ];
      for (const query of queries) {
        const res = await rollups({ appId: tenant.appId, ...query });
        expectProblem(res, 400, 'invalid_query');
        expect(res.body.errors).toEqual([
          { field: 'fromDate', code: 'invalid_range', message: expect.any(String) },
        ]);
      }
    });

    it('refuses unknown, repeated and malformed parameters', async () => {
      let res = await rollups({ appId: tenant.appId, from: '2026-11-01' });
      expectProblem(res, 400, 'invalid_query');
      expect(res.body.errors).toEqual([
        { field: 'from', code: 'unknown_parameter', message: expect.any(String) },
      ]);
      res = await request(t.http)
        .get(`/api/v1/rollups?appId=${tenant.appId}&fromDate=2026-11-01&fromDate=2026-11-02`)
        .set(bearer(tenant.apiKey));
      expectProblem(res, 400, 'invalid_query');
      expect(res.body.errors).toEqual([{ field: 'fromDate', code: 'repeated', message: expect.any(String) }]);
      res = await rollups({ appId: tenant.appId, testMode: 'TRUE' });
      expectProblem(res, 400, 'invalid_query');
      expect(res.body.errors).toEqual([
        { field: 'testMode', code: 'invalid_value', message: expect.any(String) },
      ]);
    });
  });

  describe('authentication', () => {
    it('401 without a key or with an ingest key; 403 without the scope or for another app', async () => {
      const none = await request(t.http).get('/api/v1/rollups').query({ appId: tenant.appId });
      expectProblem(none, 401, 'invalid_key');
      expect(none.headers['www-authenticate']).toBe('Bearer realm="tally", error="invalid_token"');
      expectProblem(await rollups({ appId: tenant.appId }, tenant.testKey), 401, 'wrong_key_type');
      const eventsOnly = await makeApiKey(t.app, [tenant.appId], ['events:read']);
      const res = await rollups({ appId: tenant.appId }, eventsOnly.key);
      expectProblem(res, 403, 'insufficient_scope');
      expect(res.headers['www-authenticate']).toBe(
        'Bearer realm="tally", error="insufficient_scope", scope="rollups:read"',
      );
      const other = await makeApp(t.app);
      expectProblem(await rollups({ appId: other.id }), 403, 'app_forbidden');
    });
  });

  describe('computation over stored events', () => {
    let own: Awaited<ReturnType<typeof makeTenant>>;
    let other: Awaited<ReturnType<typeof makeTenant>>;
    let mine: MixEvent[];
    let theirs: MixEvent[];
    let before: number;

    beforeAll(async () => {
      own = await makeTenant(t.app);
      other = await makeTenant(t.app);
      mine = makeMix(7, [...pastDays, todayStart], 700);
      theirs = makeMix(11, [...pastDays, todayStart], 300);
      await seedEvents(t.db, own.appId, mine.map(toSeed));
      await seedEvents(t.db, other.appId, theirs.map(toSeed));
      before = Date.now();
      const result = await service.run();
      expect(result.status).toBe('computed');
      expect(result.days).toBeGreaterThanOrEqual(10);
    });

    const all = async (tenantOf: { appId: string; apiKey: string }, extra = {}) => {
      const res = await rollups(
        { appId: tenantOf.appId, fromDate: dayOf(pastDays[0]), toDate: today, testMode: 'all', ...extra },
        tenantOf.apiKey,
      );
      expect(res.status).toBe(200);
      return res.body as Record<string, unknown>[];
    };

    it('every field matches an independent computation, per app', async () => {
      const got = await all(own);
      expect(got).toEqual(expectedRollups(own.appId, mine));
      expect(await all(other)).toEqual(expectedRollups(other.appId, theirs));
      // The total row counts distinct users over the day, which the per-event rows cannot sum to.
      const totals = got.filter((r) => r.eventName === null);
      expect(totals.length).toBe(10);
      for (const row of got) {
        expect(row.computedAt).toBeGreaterThanOrEqual(before - 1000);
        expect(row.computedAt).toBeLessThanOrEqual(Date.now());
        expect(row.final).toBe(row.date !== today);
      }
    });

    it('consumed the dirty marks of the days it computed', async () => {
      const [{ count }] = await t.db.query(
        `SELECT count(*)::int AS count FROM rollup_dirty WHERE app_id = $1`,
        [own.appId],
      );
      expect(count).toBe(0);
    });

    it('testMode and eventName filters, default range and order', async () => {
      const res = await rollups({ appId: own.appId }, own.apiKey);
      expect(res.status).toBe(200);
      const live = expectedRollups(
        own.appId,
        mine.filter((e) => !e.isTestMode),
      );
      expect(res.body).toEqual(live);
      const tests = await rollups({ appId: own.appId, testMode: 'true' }, own.apiKey);
      expect(tests.body).toEqual(
        expectedRollups(
          own.appId,
          mine.filter((e) => e.isTestMode),
        ),
      );
      const checkout = await rollups({ appId: own.appId, eventName: 'Checkout.completed' }, own.apiKey);
      expect(checkout.body).toEqual(live.filter((r) => r.eventName === 'Checkout.completed'));
      const ranged = await rollups({ appId: own.appId, range: '2d' }, own.apiKey);
      expect(ranged.body.map((r: { date: string }) => r.date)).toEqual(
        live.filter((r) => r.date >= dayOf(pastDays[3])).map((r) => r.date),
      );
      const oneDay = await rollups(
        { appId: own.appId, fromDate: dayOf(pastDays[1]), toDate: dayOf(pastDays[1]) },
        own.apiKey,
      );
      expect(oneDay.body).toEqual(live.filter((r) => r.date === dayOf(pastDays[1])));
      expect(oneDay.body[0].eventName).toBeNull();
    });

    it('computing again changes nothing but computedAt', async () => {
      const first = await all(own);
      const again = await service.compute({ appId: own.appId });
      expect(again.days).toBe(5);
      const second = await all(own);
      const strip = (rows: Record<string, unknown>[]) => rows.map(({ computedAt: _c, ...rest }) => rest);
      expect(strip(second)).toEqual(strip(first));
      const runAgain = await service.run();
      expect(runAgain.status).toBe('computed');
      expect(strip(await all(own))).toEqual(strip(first));
    });

    it('a late event for an already computed day is counted after the next run', async () => {
      const late: MixEvent[] = [
        {
          eventName: 'Late.event',
          ts: pastDays[1] + 5000,
          isTestMode: false,
          anonymousUserId: 'late-user',
          floatValue: 1.5,
        },
        { eventName: 'App.opened', ts: pastDays[1] + 6000, isTestMode: false },
      ];
      await seedEvents(t.db, own.appId, late.map(toSeed));
      mine.push(...late);
      expect(await all(own)).not.toEqual(expectedRollups(own.appId, mine));
      expect((await service.run()).status).toBe('computed');
      expect(await all(own)).toEqual(expectedRollups(own.appId, mine));
    });

    it('days with no events have no rows', async () => {
      const res = await rollups(
        { appId: own.appId, fromDate: dayOf(pastDays[0] - 3 * DAY), toDate: dayOf(pastDays[0] - DAY) },
        own.apiKey,
      );
      expect(res.status).toBe(200);
      expect(res.body).toEqual([]);
    });
  });

  describe('end to end: POST /api/ingest, then the computation', () => {
    type Tenant = Awaited<ReturnType<typeof makeTenant>>;

    /** Sends events in batches, live events with the live key and test events with the test key. */
    async function ingest(tenantOf: Tenant, events: (MixEvent & { eventId: string })[]) {
      const totals = { accepted: 0, duplicates: 0, rejected: 0 };
      for (const mode of ['live', 'test'] as const) {
        const subset = events.filter((e) => e.isTestMode === (mode === 'test'));
        for (let i = 0; i < subset.length; i += 200) {
          const batch = subset.slice(i, i + 200).map((e) => ({
            eventName: e.eventName,
            eventTime: e.ts,
            eventId: e.eventId,
            ...(e.anonymousUserId !== undefined && { anonymousUserId: e.anonymousUserId }),
            ...(e.sessionId !== undefined && { sessionId: e.sessionId }),
            ...(e.floatValue !== undefined && { floatValue: e.floatValue }),
          }));
          const res = await request(t.http)
            .post('/api/ingest')
            .set(bearer(mode === 'live' ? tenantOf.liveKey : tenantOf.testKey))
            .set('Content-Type', 'application/json')
            .send({ events: batch });
          expect(res.status).toBe(200);
          totals.accepted += res.body.accepted;
          totals.duplicates += res.body.duplicates;
          totals.rejected += res.body.rejected;
        }
      }
      return totals;
    }

    const withIds = (prefix: string, events: MixEvent[]) =>
      events.map((e, i) => ({ ...e, eventId: `${prefix}-${i}` }));

    it('ingests a mix over several days and apps, with duplicates and late events, and the rollups match', async () => {
      const a = await makeTenant(t.app);
      const b = await makeTenant(t.app);
      const mixA = withIds('a', makeMix(101, [...pastDays, todayStart], 600));
      const mixB = withIds('b', makeMix(202, [...pastDays, todayStart], 250));
      expect(await ingest(a, mixA)).toEqual({ accepted: 600, duplicates: 0, rejected: 0 });
      expect(await ingest(b, mixB)).toEqual({ accepted: 250, duplicates: 0, rejected: 0 });
      // A retried batch: every event is a duplicate and nothing is counted twice.
      expect(await ingest(a, mixA.slice(0, 150))).toEqual({ accepted: 0, duplicates: 150, rejected: 0 });

      expect((await service.run()).status).toBe('computed');
      const read = async (tenantOf: Tenant) => {
        const res = await rollups(
          { appId: tenantOf.appId, fromDate: dayOf(pastDays[0]), toDate: today, testMode: 'all' },
          tenantOf.apiKey,
        );
        expect(res.status).toBe(200);
        return res.body;
      };
      expect(await read(a)).toEqual(expectedRollups(a.appId, mixA));
      expect(await read(b)).toEqual(expectedRollups(b.appId, mixB));

      // Late events for a day that is already computed (and final), one of them a duplicate.
      const late = withIds('late', [
        {
          eventName: 'Checkout.completed',
          ts: pastDays[1] + 7_000,
          isTestMode: false,
          anonymousUserId: 'new-user',
          floatValue: 12.5,
        },
        { eventName: 'Late.only', ts: pastDays[1] + 8_000, isTestMode: false },
        { eventName: 'App.opened', ts: pastDays[1] + 9_000, isTestMode: true, sessionId: 'late-session' },
      ]);
      expect(await ingest(a, [...late, { ...mixA[0] }])).toEqual({ accepted: 3, duplicates: 1, rejected: 0 });
      expect((await service.run()).status).toBe('computed');
      const after = await read(a);
      expect(after).toEqual(expectedRollups(a.appId, [...mixA, ...late]));
      expect(
        after
          .filter((r: { date: string }) => r.date === dayOf(pastDays[1]))
          .every((r: { final: boolean }) => r.final),
      ).toBe(true);
    });
  });

  describe('scheduling', () => {
    it('registers the interval only when ROLLUPS_ENABLED', async () => {
      expect(t.app.get(SchedulerRegistry).doesExist('interval', ROLLUP_INTERVAL_NAME)).toBe(false);
      // A long interval, so that this instance never runs while the other tests compute.
      const enabled = await startTestApp({ ROLLUPS_ENABLED: 'true', ROLLUP_INTERVAL_SECONDS: '86400' });
      try {
        expect(enabled.app.get(SchedulerRegistry).doesExist('interval', ROLLUP_INTERVAL_NAME)).toBe(true);
      } finally {
        await enabled.close();
      }
    });
  });

  describe('finalisation and robustness', () => {
    it('recomputing a day whose events are gone (dropped partition) keeps its rollups', async () => {
      const own = await makeTenant(t.app);
      const day = pastDays[3];
      await seedEvents(t.db, own.appId, [{ eventName: 'App.opened', receivedAt: day + 1000, floatValue: 2 }]);
      await service.compute({ appId: own.appId, from: dayOf(day), to: dayOf(day) });
      const before = await rollups({ appId: own.appId }, own.apiKey);
      expect(before.body).toHaveLength(2);
      await t.db.query(`DELETE FROM events WHERE app_id = $1`, [own.appId]);
      const again = await service.compute({ appId: own.appId, from: dayOf(day), to: dayOf(day) });
      expect(again).toEqual({ days: 1, rows: 0 });
      expect((await rollups({ appId: own.appId }, own.apiKey)).body).toEqual(before.body);
    });

    it('a day computed before its end is not final; the next run after midnight finalises it', async () => {
      const own = await makeTenant(t.app);
      const day = pastDays[2];
      await seedEvents(t.db, own.appId, [
        { eventName: 'App.opened', receivedAt: day + 1000, anonymousUserId: 'u1' },
      ]);
      await service.compute({ appId: own.appId, from: dayOf(day), to: dayOf(day) });
      // As if that computation had run a minute before midnight.
      await t.db.query(
        `UPDATE rollups SET computed_at = $2::timestamptz - interval '1 minute' WHERE app_id = $1`,
        [own.appId, new Date(day + DAY).toISOString()],
      );
      let res = await rollups({ appId: own.appId }, own.apiKey);
      expect(res.body.map((r: { final: boolean }) => r.final)).toEqual([false, false]);
      expect(res.body[0].computedAt).toBe(day + DAY - 60_000);
      expect((await service.run()).status).toBe('computed');
      res = await rollups({ appId: own.appId }, own.apiKey);
      expect(res.body.map((r: { final: boolean }) => r.final)).toEqual([true, true]);
      expect(res.body[0]).toMatchObject({ events: 1, uniqueUsers: 1, uniqueSessions: 0, floatValue: null });
    });

    it('two instances at once: one computes, the other skips', async () => {
      const second = await startTestApp();
      try {
        const own = await makeTenant(t.app);
        await seedEvents(t.db, own.appId, [{ eventName: 'App.opened', receivedAt: pastDays[3] + 1000 }]);
        // Hold the rollups table so that the instance that takes the lock stays inside its run.
        const blocker = t.db.createQueryRunner();
        await blocker.connect();
        await blocker.startTransaction();
        await blocker.query('LOCK TABLE rollups IN SHARE MODE');
        const a = service.run();
        const b = second.app.get(RollupsService).run();
        const first = await Promise.race([a, b]);
        expect(first).toEqual({ status: 'skipped', days: 0, rows: 0 });
        await blocker.commitTransaction();
        await blocker.release();
        const results = await Promise.all([a, b]);
        expect(results.map((r) => r.status).sort()).toEqual(['computed', 'skipped']);
        const res = await rollups({ appId: own.appId }, own.apiKey);
        expect(res.body).toHaveLength(2);
        expect(res.body[0]).toMatchObject({ eventName: null, events: 1 });
      } finally {
        await second.close();
      }
    });

    it('an on-demand computation blocks on the lock held elsewhere, and gives up after its wait', async () => {
      const own = await makeTenant(t.app);
      await seedEvents(t.db, own.appId, [{ eventName: 'App.opened', receivedAt: pastDays[2] + 1000 }]);
      const holder = t.db.createQueryRunner();
      await holder.connect();
      await holder.query('SELECT pg_advisory_lock($1)', [ROLLUP_LOCK_ID]);
      try {
        await expect(service.compute({ appId: own.appId, lockWaitMs: 200 })).rejects.toMatchObject({
          status: 503,
          code: 'service_unavailable',
        });
        const waiting = service.compute({ appId: own.appId, lockWaitMs: 60_000 });
        // Let go only once the computation is queued on the lock.
        const waiters = async () =>
          (
            (await t.db.query(
              `SELECT count(*)::int AS n FROM pg_locks
                WHERE locktype = 'advisory' AND NOT granted
                  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
            )) as { n: number }[]
          )[0].n;
        while ((await waiters()) === 0) await new Promise((resolve) => setTimeout(resolve, 20));
        await holder.query('SELECT pg_advisory_unlock($1)', [ROLLUP_LOCK_ID]);
        await expect(waiting).resolves.toEqual({ days: 1, rows: 2 });
      } finally {
        await holder.query('SELECT pg_advisory_unlock_all()');
        await holder.release();
      }
    });

    it('a run killed halfway leaves its marks, and the next run gets the numbers right', async () => {
      const own = await makeTenant(t.app);
      const events = makeMix(23, [pastDays[0], pastDays[1]], 50);
      await seedEvents(t.db, own.appId, events.map(toSeed));
      const blocker = t.db.createQueryRunner();
      await blocker.connect();
      await blocker.startTransaction();
      await blocker.query('LOCK TABLE rollups IN SHARE MODE');
      const run = service.run();
      // Wait for the computation to block on its upsert, then kill its connection mid-transaction.
      let pid: number | undefined;
      for (let i = 0; i < 100 && pid === undefined; i++) {
        const rows = (await t.db.query(
          `SELECT pid FROM pg_locks
            WHERE relation = 'rollups'::regclass AND NOT granted
              AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
        )) as { pid: number }[];
        pid = rows[0]?.pid;
        if (pid === undefined) await new Promise((r) => setTimeout(r, 50));
      }
      expect(pid).toEqual(expect.any(Number));
      await t.db.query('SELECT pg_terminate_backend($1)', [pid]);
      await expect(run).rejects.toThrow(/terminat/i);
      await blocker.commitTransaction();
      await blocker.release();
      const [{ count }] = await t.db.query(
        `SELECT count(*)::int AS count FROM rollup_dirty WHERE app_id = $1`,
        [own.appId],
      );
      expect(count).toBeGreaterThan(0);
      expect((await service.run()).status).toBe('computed');
      const res = await rollups(
        { appId: own.appId, fromDate: dayOf(pastDays[0]), toDate: today, testMode: 'all' },
        own.apiKey,
      );
      expect(res.body).toEqual(expectedRollups(own.appId, events));
    });
  });
});
