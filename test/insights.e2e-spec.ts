import request from 'supertest';
import { AppsService } from '@app/auth/apps.service';
import { addDays } from '@app/common/reads/time-params';
import { localDateString, localDayStart } from '@app/common/timezones';
import { DimensionsService } from '@app/insights/dimensions.service';
import { RollupsService } from '@app/rollups/rollups.service';
import { PartitionRepository } from '@app/storage/partition.repository';
import { TEST_ACTOR, bearer, makeApiKey } from './factories';
import { seedEvents, SeedEvent } from './factories/events';
import { waitFor } from './support/harness';
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
      if (interval === 'day') expect(buckets).toHaveLength(Math.round((Date.parse(toDate) - Date.parse(fromDate)) / DAY) + 1);
      if (interval === 'total') expect(buckets).toEqual([expect.objectContaining({ start: fromDate, end: toDate })]);
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
});

export { localDayStart, waitFor, DimensionsService };
