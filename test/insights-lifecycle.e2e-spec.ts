import request from 'supertest';
import { AppsService } from '@app/auth/apps.service';
import { addDays } from '@app/common/reads/time-params';
import { localDateString } from '@app/common/timezones';
import { RollupsService } from '@app/rollups/rollups.service';
import { PartitionRepository } from '@app/storage/partition.repository';
import { TEST_ACTOR, bearer, makeApiKey } from './factories';
import { seedEvents, SeedEvent } from './factories/events';
import { clockWithinUtcDay } from './support/clock';
import { waitFor } from './support/harness';
import { expectProblem } from './support/problem';
import { useTestApp } from './support/test-app';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** Three users a day over the last `days` days, plus `gone` on some of them. */
function events(now: number, days: number): SeedEvent[] {
  const out: SeedEvent[] = [];
  for (let d = 0; d < days; d++) {
    const ts = now - d * DAY - 2 * HOUR;
    for (const user of ['a', 'b', `c-${d % 4}`]) {
      out.push({
        eventName: 'Open',
        receivedAt: ts,
        anonymousUserId: user,
        sessionId: `${user}-${d}`,
        platform: 'iOS',
      });
    }
    if (d % 3 === 0) {
      out.push({
        eventName: 'Buy',
        receivedAt: ts + HOUR / 2,
        anonymousUserId: 'gone',
        sessionId: `g-${d}`,
        platform: 'Web',
      });
    }
  }
  return out;
}

describe('insights: erasure, zone changes and the value bound', () => {
  const t = useTestApp({ ROLLUPS_ENABLED: 'false', BREAKDOWN_MAX_VALUES: '5', ERASURE_PAUSE_PERCENT: '0' });
  // The seeded events sit up to three hours before `now`, on `now`'s UTC date.
  const now = clockWithinUtcDay(4 * HOUR, 'ahead');

  beforeAll(async () => {
    const partitions = t.app.get(PartitionRepository);
    for (let d = 0; d <= 12; d++) await partitions.create(new Date(now - d * DAY));
  });

  async function app(zone = 'UTC') {
    const created = await t.app.get(AppsService).create(`insights-${Math.random()}`, TEST_ACTOR, zone);
    const key = (await makeApiKey(t.app, [created.id], ['rollups:read', 'privacy:write'])).key;
    return { appId: created.id, key };
  }

  const get = (path: string, key: string) => request(t.http).get(path).set(bearer(key));

  async function bruteUsers(appId: string, zone: string, start: string, end: string): Promise<number> {
    const [row] = (await t.db.query(
      `SELECT count(DISTINCT anonymous_user_id)::int AS n FROM events
        WHERE app_id = $1 AND NOT is_test_mode AND (ts AT TIME ZONE $2)::date BETWEEN $3::date AND $4::date`,
      [appId, zone, start, end],
    )) as { n: number }[];
    return row.n;
  }

  it('a finished deletion lowers every number by exactly that user, past event retention too', async () => {
    const { appId, key } = await app();
    await seedEvents(t.db, appId, events(now, 10));
    await t.app.get(RollupsService).compute({ appId });
    const today = localDateString(now, 'UTC');
    const from = addDays(today, -9);
    // A day past retention: its events are gone (dropped partition), its user set stays.
    const oldDay = addDays(today, -400);
    await t.db.query(
      `INSERT INTO insight_day_users (app_id, rezone, day, is_test_mode, event_name, users, timezone, day_end, computed_at)
       SELECT app_id, false, $2::date, false, '', users, timezone, now(), now()
         FROM insight_day_users WHERE app_id = $1 AND NOT rezone AND event_name = '' AND day = $3::date`,
      [appId, oldDay, addDays(today, -3)],
    );
    // And its breakdown rows: their lists have no events left to be recomputed from.
    await t.db.query(
      `INSERT INTO insight_breakdowns (app_id, rezone, dimension, day, is_test_mode, kind, value, events, fv_count,
                                       fv_sum, fv_min, fv_max, users, sessions, timezone, day_end, computed_at)
       SELECT app_id, false, dimension, $2::date, is_test_mode, kind, value, events, fv_count, fv_sum, fv_min,
              fv_max, users, sessions, timezone, now(), now()
         FROM insight_breakdowns WHERE app_id = $1 AND NOT rezone AND day = $3::date`,
      [appId, oldDay, addDays(today, -3)],
    );
    const oldPlatforms = async () =>
      (
        (await get(`/api/v1/breakdown?appId=${appId}&by=platform&fromDate=${oldDay}&toDate=${oldDay}`, key))
          .body as { value: string; events: number; users: number }[]
      ).map((r) => [r.value, r.events, r.users]);
    const read = async () => ({
      oldPlatforms: await oldPlatforms(),
      total: (
        await get(`/api/v1/active-users?appId=${appId}&fromDate=${from}&toDate=${today}&interval=total`, key)
      ).body[0].users as number,
      days: (
        (await get(`/api/v1/active-users?appId=${appId}&fromDate=${from}&toDate=${today}`, key)).body as {
          users: number;
        }[]
      ).map((b) => b.users),
      old: (await get(`/api/v1/active-users?appId=${appId}&fromDate=${oldDay}&toDate=${oldDay}`, key)).body[0]
        .users as number,
      platforms: (
        (await get(`/api/v1/breakdown?appId=${appId}&by=platform&fromDate=${from}&toDate=${today}`, key))
          .body as {
          value: string;
          users: number;
        }[]
      ).map((r) => [r.value, r.users]),
    });
    const before = await read();
    expect(before.total).toBe(7);
    expect(before.old).toBe(4);
    expect(before.platforms).toEqual([
      ['iOS', 6],
      ['Web', 1],
    ]);

    const res = await request(t.http)
      .post('/api/v1/deletions')
      .set(bearer(key))
      .set('Content-Type', 'application/json')
      .send({ appId, anonymousUserIds: ['gone'] });
    expect(res.status).toBe(202);
    await waitFor(
      async () => {
        const status = await get(`/api/v1/deletions/${res.body.id}`, key);
        return status.body.status === 'done' ? status.body : null;
      },
      { timeoutMs: 60_000, what: 'the deletion to finish' },
    );
    const after = await read();
    expect(after.total).toBe(before.total - 1);
    expect(after.old).toBe(before.old - 1);
    expect(after.days).toEqual(before.days.map((n, i) => n - ((9 - i) % 3 === 0 ? 1 : 0)));
    expect(after.platforms).toEqual([['iOS', 6]]);
    // Past retention the events stay counted (nothing is left to recount them from); the user is gone.
    expect(after.oldPlatforms).toEqual(
      before.oldPlatforms.map(([value, events, users]) => [
        value,
        events,
        value === 'Web' ? Number(users) - 1 : users,
      ]),
    );
    expect(before.oldPlatforms).toContainEqual(['Web', expect.any(Number), 1]);
    expect(after.total).toBe(await bruteUsers(appId, 'UTC', from, today));
    // The user's number is forgotten: only the other users keep one.
    const ids = (await t.db.query(
      `SELECT sum(length(entries) / 18)::int AS n FROM insight_id_packs WHERE app_id = $1 AND kind = 'u'`,
      [appId],
    )) as { n: number }[];
    expect(ids[0].n).toBe(6);
  });

  it('a zone change recomputes the days of the user sets in the new zone', async () => {
    const { appId, key } = await app('UTC');
    // Late-evening UTC events, which fall on the previous day in New York.
    const seeded: SeedEvent[] = [];
    for (let d = 1; d <= 6; d++) {
      const ts = Date.parse(`${addDays(localDateString(now, 'UTC'), -d)}T02:30:00Z`);
      seeded.push({ eventName: 'Open', receivedAt: ts, anonymousUserId: `u-${d}` });
      seeded.push({ eventName: 'Open', receivedAt: ts + 3 * HOUR, anonymousUserId: `u-${d + 1}` });
    }
    await seedEvents(t.db, appId, seeded);
    const rollups = t.app.get(RollupsService);
    await rollups.compute({ appId });
    const zone = 'America/New_York';
    const change = await rollups.setTimezone(appId, zone, TEST_ACTOR);
    expect(change.recomputing).toBe(true);
    await rollups.run(Date.now(), 600_000);
    const today = localDateString(now, zone);
    const from = addDays(today, -7);
    const days = (await get(`/api/v1/active-users?appId=${appId}&fromDate=${from}&toDate=${today}`, key))
      .body as {
      start: string;
      users: number;
    }[];
    for (const b of days)
      expect([b.start, b.users]).toEqual([b.start, await bruteUsers(appId, zone, b.start, b.start)]);
    expect(days.some((b) => b.users === 2)).toBe(true);
    const rezoneRows = (await t.db.query(
      `SELECT count(*)::int AS n FROM insight_day_users WHERE app_id = $1 AND rezone`,
      [appId],
    )) as { n: number }[];
    expect(rezoneRows[0].n).toBe(0);
  });

  it('keeps at most BREAKDOWN_MAX_VALUES values per day and dimension under a flood, exactly', async () => {
    const { appId, key } = await app();
    const ts = now - 3 * HOUR;
    const flood: SeedEvent[] = [];
    for (let i = 0; i < 300; i++) {
      flood.push({ eventName: 'Open', receivedAt: ts, anonymousUserId: `u-${i % 50}`, platform: `p-${i}` });
    }
    for (let i = 0; i < 20; i++)
      flood.push({ eventName: 'Open', receivedAt: ts, anonymousUserId: 'top', platform: 'iOS' });
    await seedEvents(t.db, appId, flood);
    await t.app.get(RollupsService).compute({ appId });
    const stored = (await t.db.query(
      `SELECT kind, count(*)::int AS n FROM insight_breakdowns
        WHERE app_id = $1 AND dimension = 'platform' GROUP BY kind ORDER BY kind`,
      [appId],
    )) as { kind: number; n: number }[];
    expect(stored).toEqual([
      { kind: 0, n: 5 },
      { kind: 2, n: 1 },
    ]);
    const rows = (await get(`/api/v1/breakdown?appId=${appId}&by=platform&range=1d&limit=1000`, key))
      .body as {
      value: string | null;
      events: number;
      users: number;
      other: boolean;
    }[];
    expect(rows).toHaveLength(6);
    expect(rows[0]).toMatchObject({ value: 'iOS', events: 20, users: 1, other: false });
    expect(rows[5]).toMatchObject({ value: null, events: 296, users: 50, other: true });
    expect(rows.reduce((s, r) => s + r.events, 0)).toBe(320);
  });

  describe('errors', () => {
    let appId: string;
    let key: string;
    beforeAll(async () => {
      ({ appId, key } = await app());
    });

    it.each([
      ['active-users', 'interval=year', 'interval', 'invalid_value'],
      ['active-users', 'interval=week&window=7', 'window', 'conflict'],
      ['active-users', 'window=0', 'window', 'out_of_range'],
      ['active-users', 'window=91', 'window', 'out_of_range'],
      ['active-users', 'window=1.5', 'window', 'not_an_integer'],
      ['active-users', 'fromDate=2026-02-30', 'fromDate', 'invalid_date'],
      ['active-users', 'range=7d&fromDate=2026-01-01', 'range', 'conflict'],
      ['active-users', 'range=400d', 'range', 'out_of_range'],
      ['active-users', 'fromDate=2026-01-02&toDate=2026-01-01', 'fromDate', 'invalid_range'],
      ['active-users', 'fromDate=2024-01-01&toDate=2026-01-01', 'fromDate', 'span_too_long'],
      ['active-users', 'testMode=maybe', 'testMode', 'invalid_value'],
      ['breakdown', 'by=platform&interval=week', 'interval', 'invalid_value'],
      ['breakdown', 'by=platform&limit=0', 'limit', 'out_of_range'],
      ['breakdown', 'by=platform&limit=1001', 'limit', 'out_of_range'],
      ['breakdown', 'by=platform&limit=abc', 'limit', 'not_an_integer'],
      ['breakdown', 'interval=day', 'by', 'required'],
      ['breakdown', 'by=platform&platform=%01', 'platform', 'invalid_value'],
      ['breakdown', 'by=platform&country=DE', 'country', 'unknown_parameter'],
    ])('GET /api/v1/%s?%s is 400 on %s (%s)', async (path, query, field, code) => {
      const res = await get(`/api/v1/${path}?appId=${appId}&${query}`, key);
      expectProblem(res, 400, 'invalid_query');
      expect(res.body.errors).toEqual(expect.arrayContaining([expect.objectContaining({ field, code })]));
    });

    it.each(['by=country', 'by=payload.plan', 'by=payload.', 'by=build_number'])(
      'GET /api/v1/breakdown?%s is 400 unknown_dimension',
      async (query) => {
        const res = await get(`/api/v1/breakdown?appId=${appId}&${query}`, key);
        expectProblem(res, 400, 'unknown_dimension');
        expect(res.body.errors).toEqual([
          expect.objectContaining({ field: 'by', code: 'unknown_dimension' }),
        ]);
      },
    );

    it.each(['active-users', 'breakdown?by=platform'])(
      'GET /api/v1/%s needs rollups:read and the app',
      async (path) => {
        const sep = path.includes('?') ? '&' : '?';
        const eventsOnly = (await makeApiKey(t.app, [appId], ['events:read'])).key;
        const scope = await get(`/api/v1/${path}${sep}appId=${appId}`, eventsOnly);
        expectProblem(scope, 403, 'insufficient_scope');
        expect(scope.headers['www-authenticate']).toContain('scope="rollups:read"');
        const other = await app();
        const forbidden = await get(`/api/v1/${path}${sep}appId=${other.appId}`, key);
        expectProblem(forbidden, 403, 'app_forbidden');
        const none = await request(t.http).get(`/api/v1/${path}${sep}appId=${appId}`);
        expectProblem(none, 401, 'invalid_key');
      },
    );
  });
});

describe('insights: read rate limit', () => {
  const t = useTestApp({ ROLLUPS_ENABLED: 'false', READ_RATE_REQUESTS: '2', RATE_WINDOW_MS: '60000' });

  it.each(['active-users', 'breakdown?by=platform'])(
    'GET /api/v1/%s is rate limited per key',
    async (path) => {
      const created = await t.app.get(AppsService).create('limited', TEST_ACTOR);
      const key = (await makeApiKey(t.app, [created.id], ['rollups:read'])).key;
      const sep = path.includes('?') ? '&' : '?';
      const url = `/api/v1/${path}${sep}appId=${created.id}`;
      for (let i = 0; i < 2; i++) {
        const ok = await request(t.http).get(url).set(bearer(key));
        expect(ok.status).toBe(200);
        expect(ok.headers['ratelimit-limit']).toBe('2');
      }
      const limited = await request(t.http).get(url).set(bearer(key));
      expectProblem(limited, 429, 'rate_limited');
      expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    },
  );
});
