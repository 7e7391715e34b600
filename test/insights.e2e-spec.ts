import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { TallyReader } from '../packages/client/src/index';
import { AppsService } from '@app/auth/apps.service';
import { addDays } from '@app/common/reads/time-params';
import { localDateString } from '@app/common/timezones';
import { DimensionsService } from '@app/insights/dimensions.service';
import { RollupsService } from '@app/rollups/rollups.service';
import { PartitionRepository } from '@app/storage/partition.repository';
import { TEST_ACTOR, bearer, makeApiKey } from './factories';
import { seedEvents, SeedEvent } from './factories/events';
import { useTestApp } from './support/test-app';

const ZONE = 'America/New_York';
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** A small deterministic generator, so that a failure can be replayed. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const pick = <T>(r: () => number, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];

/** Events of 40 users over the 36 local days before today, across the end of daylight saving time. */
function makeEvents(seed: number, now: number): SeedEvent[] {
  const r = rng(seed);
  const events: SeedEvent[] = [];
  for (let i = 0; i < 900; i++) {
    const ts = now - Math.floor(r() * 36 * DAY) - HOUR;
    events.push({
      eventName: pick(r, ['Shop.viewed', 'Cart.added', 'Checkout.completed']),
      receivedAt: ts,
      eventTime: ts,
      anonymousUserId: r() < 0.05 ? null : `user-${Math.floor(r() * 40)}`,
      sessionId: r() < 0.05 ? null : `s-${Math.floor(r() * 120)}`,
      isTestMode: r() < 0.1,
      platform: pick(r, ['iOS', 'Android', 'Web', null]),
      appVersion: pick(r, ['2.4.1', '2.4.0', '2.3.9', '1.0.0', null]),
      osVersion: pick(r, ['17.1', '14', null]),
      deviceModel: pick(r, ['iPhone15,2', 'Pixel 8', null]),
      locale: pick(r, ['en-US', 'de-DE', 'fr-FR']),
      floatValue: r() < 0.3 ? Math.round(r() * 1000) / 100 : null,
      payload: r() < 0.2 ? {} : { plan: pick(r, ['free', 'pro', 'team']), items: Math.floor(r() * 3) },
    });
  }
  return events;
}

interface Bucket {
  start: string;
  end: string;
  users: number;
  final: boolean;
}

describe('insights: active users and breakdowns', () => {
  const t = useTestApp({ ROLLUPS_ENABLED: 'false' });
  const now = Date.now();
  let appId: string;
  let readKey: string;

  const localDay = (zone = ZONE) => `(ts AT TIME ZONE '${zone}')::date`;

  async function bruteUsers(
    start: string,
    end: string,
    opts: { eventName?: string; modes?: boolean[]; zone?: string; app?: string } = {},
  ): Promise<number> {
    const [row] = (await t.db.query(
      `SELECT count(DISTINCT anonymous_user_id)::int AS n FROM events
        WHERE app_id = $1 AND ${localDay(opts.zone)} BETWEEN $2::date AND $3::date
          AND is_test_mode = ANY($4::boolean[]) AND ($5::text IS NULL OR event_name = $5)`,
      [opts.app ?? appId, start, end, opts.modes ?? [false], opts.eventName ?? null],
    )) as { n: number }[];
    return row.n;
  }

  async function activeUsers(query: string, key = readKey): Promise<Bucket[]> {
    const res = await request(t.http).get(`/api/v1/active-users?appId=${appId}&${query}`).set(bearer(key));
    expect(res.status).toBe(200);
    return res.body as Bucket[];
  }

  beforeAll(async () => {
    const partitions = t.app.get(PartitionRepository);
    for (let d = 0; d <= 38; d++) await partitions.create(new Date(now - d * DAY));
    const app = await t.app.get(AppsService).create('Insights', TEST_ACTOR, ZONE);
    appId = app.id;
    readKey = (await makeApiKey(t.app, [appId], ['rollups:read'])).key;
    await seedEvents(t.db, appId, makeEvents(39, now));
    await t.app.get(RollupsService).compute({ appId });
  });

  it('counts exactly the distinct users of random ranges, intervals and windows, across a DST change', async () => {
    const r = rng(7);
    const today = localDateString(now, ZONE);
    for (let i = 0; i < 24; i++) {
      const toDate = addDays(today, -Math.floor(r() * 10));
      const fromDate = addDays(toDate, -Math.floor(r() * 30));
      const interval = pick(r, ['day', 'week', 'month', 'total'] as const);
      const window = interval === 'day' ? pick(r, [1, 3, 7, 28]) : undefined;
      const eventName = r() < 0.3 ? 'Cart.added' : undefined;
      const testMode = r() < 0.3 ? 'all' : undefined;
      const query = [
        `fromDate=${fromDate}`,
        `toDate=${toDate}`,
        `interval=${interval}`,
        window ? `window=${window}` : '',
        eventName ? `eventName=${eventName}` : '',
        testMode ? `testMode=${testMode}` : '',
      ]
        .filter(Boolean)
        .join('&');
      const buckets = await activeUsers(query);
      const modes = testMode ? [false, true] : [false];
      // Empty buckets included: one per day, week, month, or one in all.
      if (interval === 'day')
        expect(buckets).toHaveLength(Math.round((Date.parse(toDate) - Date.parse(fromDate)) / DAY) + 1);
      if (interval === 'total')
        expect(buckets).toEqual([expect.objectContaining({ start: fromDate, end: toDate })]);
      expect(buckets[0].start <= fromDate).toBe(true);
      expect(buckets[buckets.length - 1].end).toBe(toDate);
      for (const b of buckets) {
        expect({ query, ...b, users: b.users }).toEqual({
          query,
          ...b,
          users: await bruteUsers(b.start, b.end, { eventName, modes }),
        });
        if (window) expect(b.start).toBe(addDays(b.end, -(window - 1)));
      }
    }
  });

  it('covers the day daylight saving time ended (25 hours) and equals the rollups for one day', async () => {
    const dstEnd = '2026-11-01';
    const [b] = await activeUsers(`fromDate=${dstEnd}&toDate=${dstEnd}&interval=total`);
    expect(b.users).toBe(await bruteUsers(dstEnd, dstEnd));
    const rollups = await request(t.http)
      .get(`/api/v1/rollups?appId=${appId}&fromDate=${dstEnd}&toDate=${dstEnd}`)
      .set(bearer(readKey));
    const total = (rollups.body as { eventName: string | null; uniqueUsers: number }[]).find(
      (row) => row.eventName === null,
    );
    expect(b.users).toBe(total?.uniqueUsers ?? 0);
    expect(b.final).toBe(true);
    // Weeks are ISO weeks, Monday first, clipped to the range.
    const weeks = await activeUsers('fromDate=2026-10-28&toDate=2026-11-10&interval=week');
    expect(weeks.map((w) => [w.start, w.end])).toEqual([
      ['2026-10-28', '2026-11-01'],
      ['2026-11-02', '2026-11-08'],
      ['2026-11-09', '2026-11-10'],
    ]);
  });

  it('answers today as not final, and empty buckets with 0 users', async () => {
    const today = localDateString(now, ZONE);
    const [b] = await activeUsers(`fromDate=${today}&toDate=${today}`);
    expect(b.final).toBe(false);
    const empty = await activeUsers('fromDate=2025-01-01&toDate=2025-01-03');
    expect(empty).toEqual([
      { start: '2025-01-01', end: '2025-01-01', users: 0, final: true },
      { start: '2025-01-02', end: '2025-01-02', users: 0, final: true },
      { start: '2025-01-03', end: '2025-01-03', users: 0, final: true },
    ]);
  });

  interface Row {
    date?: string;
    value: string | null;
    events: number;
    users: number;
    sessions: number;
    floatValue: { count: number; sum: number; min: number; max: number; avg: number } | null;
    other: boolean;
  }

  async function breakdown(query: string, key = readKey): Promise<Row[]> {
    const res = await request(t.http).get(`/api/v1/breakdown?appId=${appId}&${query}`).set(bearer(key));
    expect(res.status).toBe(200);
    return res.body as Row[];
  }

  /** The breakdown as a brute-force count over the stored events, top `limit` and the rest as other. */
  async function bruteBreakdown(
    expr: string,
    fromDate: string,
    toDate: string,
    limit: number,
    where = 'true',
    params: unknown[] = [],
  ): Promise<Row[]> {
    const rows = (await t.db.query(
      `WITH ev AS (
         SELECT ${expr} AS value, anonymous_user_id, session_id, float_value FROM events
          WHERE app_id = $1 AND ${localDay()} BETWEEN $2::date AND $3::date AND NOT is_test_mode AND ${where}
       ), ranked AS (
         SELECT value, row_number() OVER (ORDER BY count(*) DESC, value NULLS LAST) AS rn FROM ev GROUP BY value
       )
       SELECT CASE WHEN rn > $4 THEN NULL ELSE ev.value END AS value, rn > $4 AS other,
              count(*)::int AS events, count(DISTINCT anonymous_user_id)::int AS users,
              count(DISTINCT session_id)::int AS sessions, count(float_value)::int AS fv_count,
              sum(float_value::numeric)::float8 AS fv_sum
         FROM ev JOIN ranked ON ranked.value IS NOT DISTINCT FROM ev.value
        GROUP BY 1, 2 ORDER BY 2, 3 DESC, 1 NULLS LAST`,
      [appId, fromDate, toDate, limit, ...params],
    )) as (Omit<Row, 'floatValue'> & { fv_count: number; fv_sum: number | null })[];
    return rows.map(({ fv_count, fv_sum, ...row }) => ({
      ...row,
      floatValue: fv_count ? { count: fv_count, sum: fv_sum! } : null,
    })) as Row[];
  }

  const comparable = (rows: Row[]) =>
    rows.map((r) => ({
      ...r,
      floatValue: r.floatValue
        ? { count: r.floatValue.count, sum: Number(r.floatValue.sum.toFixed(6)) }
        : null,
    }));

  it('breaks down by each built-in dimension exactly, with the null and other rows, adding up to the rollups', async () => {
    const today = localDateString(now, ZONE);
    const fromDate = addDays(today, -20);
    const columns: Record<string, string> = {
      eventName: 'event_name',
      platform: 'platform',
      appVersion: 'app_version',
      osVersion: 'os_version',
      deviceModel: 'device_model',
      locale: 'locale',
    };
    const rollups = await request(t.http)
      .get(`/api/v1/rollups?appId=${appId}&fromDate=${fromDate}&toDate=${today}`)
      .set(bearer(readKey));
    const rollupEvents = (rollups.body as { eventName: string | null; events: number }[])
      .filter((r) => r.eventName === null)
      .reduce((sum, r) => sum + r.events, 0);
    for (const [by, column] of Object.entries(columns)) {
      for (const limit of [2, 50]) {
        const rows = await breakdown(`by=${by}&fromDate=${fromDate}&toDate=${today}&limit=${limit}`);
        expect({ by, limit, rows: comparable(rows) }).toEqual({
          by,
          limit,
          rows: comparable(await bruteBreakdown(column, fromDate, today, limit)),
        });
        expect(rows.reduce((sum, r) => sum + r.events, 0)).toBe(rollupEvents);
      }
    }
    const byPlatform = await breakdown(`by=platform&fromDate=${fromDate}&toDate=${today}&limit=2`);
    expect(byPlatform.filter((r) => r.other)).toHaveLength(1);
    expect(byPlatform[byPlatform.length - 1].other).toBe(true);
  });

  it('breaks down per day, and with filters on the other dimensions', async () => {
    const today = localDateString(now, ZONE);
    const fromDate = addDays(today, -6);
    const perDay = await breakdown(`by=locale&fromDate=${fromDate}&toDate=${today}&interval=day`);
    for (let day = fromDate; day <= today; day = addDays(day, 1)) {
      const rows = perDay.filter((r) => r.date === day).map(({ date: _d, ...r }) => r);
      expect({ day, rows: comparable(rows) }).toEqual({
        day,
        rows: comparable(await bruteBreakdown('locale', day, day, 50)),
      });
    }
    // One value a day and the rest folded: every whole day has its own other row, counted apart.
    // Today may hold no event yet (just after midnight in the app's zone): it is only compared.
    const perDayOther = await breakdown(
      `by=appVersion&fromDate=${fromDate}&toDate=${today}&interval=day&limit=1`,
    );
    for (let day = fromDate; day <= today; day = addDays(day, 1)) {
      const rows = perDayOther.filter((r) => r.date === day).map(({ date: _d, ...r }) => r);
      if (day < today) expect({ day, other: rows.filter((r) => r.other).length }).toEqual({ day, other: 1 });
      expect({ day, rows: comparable(rows) }).toEqual({
        day,
        rows: comparable(await bruteBreakdown('app_version', day, day, 1)),
      });
    }
    const filtered = await breakdown(
      `by=appVersion&fromDate=${fromDate}&toDate=${today}&platform=iOS&eventName=Cart.added&limit=3`,
    );
    expect(comparable(filtered)).toEqual(
      comparable(
        await bruteBreakdown('app_version', fromDate, today, 3, `platform = $5 AND event_name = $6`, [
          'iOS',
          'Cart.added',
        ]),
      ),
    );
  });

  it('breaks down by a declared payload key only once declared, recomputing the retained days', async () => {
    const today = localDateString(now, ZONE);
    const fromDate = addDays(today, -30);
    const refused = await request(t.http)
      .get(`/api/v1/breakdown?appId=${appId}&by=payload.plan`)
      .set(bearer(readKey));
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({
      code: 'unknown_dimension',
      status: 400,
      errors: [expect.objectContaining({ field: 'by', code: 'unknown_dimension' })],
    });
    const change = await t.app.get(DimensionsService).set(appId, ['plan'], TEST_ACTOR);
    expect(change).toMatchObject({ dimensions: ['plan'], previousDimensions: [] });
    // The declaration marks the retained days; the next run recomputes them.
    await t.app.get(RollupsService).run();
    const rows = await breakdown(`by=payload.plan&fromDate=${fromDate}&toDate=${today}`);
    expect(comparable(rows)).toEqual(
      comparable(await bruteBreakdown(`payload->>'plan'`, fromDate, today, 50)),
    );
    expect(rows.some((r) => r.value === null && !r.other)).toBe(true);
    const key = await request(t.http).get('/api/v1/key').set(bearer(readKey));
    expect(key.body.apps).toEqual([expect.objectContaining({ id: appId, dimensions: ['plan'] })]);
    const audit = (await t.db.query(
      `SELECT details FROM audit_log WHERE app_id = $1 AND action = 'app.dimensions_changed'`,
      [appId],
    )) as { details: { to: string[] } }[];
    expect(audit.map((a) => a.details.to)).toEqual([['plan']]);
  });

  it('TallyReader.activeUsers and TallyReader.breakdown read the same answers', async () => {
    if (!t.http.listening) t.http.listen(0);
    const { port } = t.http.address() as AddressInfo;
    const reader = new TallyReader({ endpoint: `http://127.0.0.1:${port}`, apiKey: readKey });
    const today = localDateString(now, ZONE);
    const fromDate = addDays(today, -27);
    const query = `fromDate=${fromDate}&toDate=${today}&interval=day&window=7`;
    expect(await reader.activeUsers({ appId, fromDate, toDate: today, interval: 'day', window: 7 })).toEqual(
      await activeUsers(query),
    );
    expect(
      await reader.breakdown({
        appId,
        by: 'appVersion',
        range: '30d',
        limit: 2,
        platform: 'iOS',
        testMode: 'all',
      }),
    ).toEqual(await breakdown('by=appVersion&range=30d&limit=2&platform=iOS&testMode=all'));
    await expect(reader.breakdown({ appId, by: 'country' })).rejects.toMatchObject({
      status: 400,
      code: 'unknown_dimension',
    });
  });
});
