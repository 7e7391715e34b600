// A recomputation keeps an insight day whose inputs did not change (same events, window,
// dimensions and event names) as it is, rather than reading and numbering its events again; a day
// that only gained events adds them to its rows (see also insight-day-increments); any other
// change computes the day again. The answers are the same either way, and a day computed before it
// ended becomes final when it is kept after its end.
import request from 'supertest';
import type { QueryRunner } from 'typeorm';
import { AppsService } from '@app/auth/apps.service';
import { DimensionsService } from '@app/insights/dimensions.service';
import { RollupsService } from '@app/rollups/rollups.service';
import { PartitionRepository } from '@app/storage/partition.repository';
import { TEST_ACTOR, bearer, makeApiKey } from './factories';
import { seedEvents, SeedEvent } from './factories/events';
import { sample } from './support/harness';
import { useTestApp } from './support/test-app';

const DAY = 86_400_000;

/** 300 events of 60 users over the 3 days before today, with a payload key `plan`. */
function makeEvents(now: number): SeedEvent[] {
  return Array.from({ length: 300 }, (_, i) => {
    const ts = now - (1 + (i % 3)) * DAY + (i % 53) * 60_000;
    return {
      eventName: i % 2 ? 'Shop.viewed' : 'Cart.added',
      receivedAt: ts,
      eventTime: ts,
      anonymousUserId: `user-${i % 60}`,
      sessionId: `s-${i % 90}`,
      platform: i % 3 ? 'iOS' : 'Android',
      payload: { plan: i % 4 ? 'free' : 'pro' },
    };
  });
}

const utcDay = (t: number) => new Date(t).toISOString().slice(0, 10);

describe('insights: a day computed from unchanged inputs is kept', () => {
  const t = useTestApp({ ROLLUPS_ENABLED: 'false' });
  const now = Date.now();
  const [day1, day2, day3] = [1, 2, 3].map((d) => utcDay(now - d * DAY));
  let appId: string;
  let readKey: string;
  let runner: QueryRunner;

  /**
   * Every insight row of the app with its time of computation, and every day's digest, by table
   * and day: a day computed again has its rows written at the new transaction's time.
   */
  const versions = async (): Promise<Record<string, string>> => {
    const rows = (await runner.query(
      `SELECT 'u:' || day || ':' || is_test_mode || ':' || event_name AS k, computed_at::text AS x
         FROM insight_day_users WHERE app_id = $1
       UNION ALL
       SELECT 'b:' || day || ':' || dimension || ':' || kind || ':' || value, computed_at::text
         FROM insight_breakdowns WHERE app_id = $1
       UNION ALL
       SELECT 's:' || day, concat_ws(':', encode(source, 'hex'), events, id_sum, hash_sum, max_id, names)
         FROM insight_day_sources WHERE app_id = $1`,
      [appId],
    )) as { k: string; x: string }[];
    return Object.fromEntries(rows.map((r) => [r.k, r.x]));
  };
  const ofDay = (v: Record<string, string>, day: string) =>
    Object.fromEntries(Object.entries(v).filter(([k]) => k.split(':')[1] === day));
  const get = async (path: string) => {
    const res = await request(t.http).get(path).set(bearer(readKey));
    expect(res.status).toBe(200);
    return res.body as Record<string, unknown>[];
  };
  const answers = async () => ({
    days: await get(`/api/v1/active-users?appId=${appId}&fromDate=${day3}&toDate=${day1}&interval=day`),
    total: await get(`/api/v1/active-users?appId=${appId}&fromDate=${day3}&toDate=${day1}&interval=total`),
    platform: await get(
      `/api/v1/breakdown?appId=${appId}&fromDate=${day3}&toDate=${day1}&by=platform&interval=day`,
    ),
  });
  const compute = () => t.app.get(RollupsService).compute({ appId });
  const metrics = async () => {
    const text = (await request(t.http).get('/metrics').expect(200)).text;
    const days = (outcome: string) => sample(text, 'tally_insight_days_total', { outcome }) ?? -1;
    return { kept: days('kept'), computed: days('computed'), added: days('added') };
  };

  beforeAll(async () => {
    const partitions = t.app.get(PartitionRepository);
    for (let d = 0; d <= 4; d++) await partitions.create(new Date(now - d * DAY));
    appId = (await t.app.get(AppsService).create('Unchanged days', TEST_ACTOR)).id;
    readKey = (await makeApiKey(t.app, [appId], ['rollups:read'])).key;
    await seedEvents(t.db, appId, makeEvents(now));
    await compute();
    runner = t.db.createQueryRunner();
    await runner.connect();
  });

  afterAll(async () => {
    await runner?.release();
  });

  it('a second computation with nothing changed writes no row and answers the same', async () => {
    const [before, answered] = [await versions(), await answers()];
    expect(Object.keys(ofDay(before, day1)).length).toBeGreaterThan(5);
    expect(
      Object.keys(before)
        .filter((k) => k.startsWith('s:'))
        .sort(),
    ).toEqual([day1, day2, day3].map((d) => `s:${d}`).sort());
    const metricsBefore = await metrics();
    const result = await compute();
    expect(result.days).toBeGreaterThanOrEqual(3);
    expect(await versions()).toEqual(before);
    expect(await answers()).toEqual(answered);
    // Every day with events was kept, none computed (GET /metrics).
    const metricsAfter = await metrics();
    expect(metricsAfter.kept - metricsBefore.kept).toBe(3);
    expect(metricsAfter.computed).toBe(metricsBefore.computed);
  });

  it('a late event is added to its day alone, as computing the day whole would, and the others are kept', async () => {
    const [before, answered] = [await versions(), await answers()];
    const ts = now - 2 * DAY + 5_000;
    await seedEvents(t.db, appId, [
      {
        eventName: 'Shop.viewed',
        receivedAt: ts,
        eventTime: ts,
        anonymousUserId: 'late-user',
        platform: 'web',
      },
    ]);
    const metricsBefore = await metrics();
    await compute();
    const metricsAfter = await metrics();
    const outcomes = (m: typeof metricsAfter) => [m.computed, m.added, m.kept];
    expect(outcomes(metricsAfter).map((n, i) => n - outcomes(metricsBefore)[i])).toEqual([0, 1, 2]);
    const after = await versions();
    expect(ofDay(after, day1)).toEqual(ofDay(before, day1));
    expect(ofDay(after, day3)).toEqual(ofDay(before, day3));
    // The rows the event reaches are written (its platform's row is new), the others kept, and
    // the day's source holds one event more.
    const changed = ofDay(after, day2);
    expect(Object.keys(changed).length).toBe(Object.keys(ofDay(before, day2)).length + 1);
    expect(changed[`b:${day2}:platform:0:web`]).toBeDefined();
    expect(changed[`b:${day2}:platform:0:iOS`]).toBe(before[`b:${day2}:platform:0:iOS`]);
    expect(changed[`b:${day2}:eventName:0:Shop.viewed`]).not.toBe(
      before[`b:${day2}:eventName:0:Shop.viewed`],
    );
    expect(changed[`s:${day2}`].split(':')[1]).toBe(String(Number(before[`s:${day2}`].split(':')[1]) + 1));

    const now2 = await answers();
    const users = (a: typeof answered, day: string) => a.days.find((b) => b.start === day)!.users as number;
    expect(users(now2, day2)).toBe(users(answered, day2) + 1);
    expect(users(now2, day1)).toBe(users(answered, day1));
    expect(now2.total[0].users).toBe((answered.total[0].users as number) + 1);
    expect(now2.platform.find((r) => r.date === day2 && r.value === 'web')).toMatchObject({
      events: 1,
      users: 1,
    });
  });

  it('a day computed before it ended becomes final when kept after its end', async () => {
    // As if the day's last computation had run an hour before its end (the app's days are UTC).
    const hourBeforeEnd = new Date(Date.parse(`${day1}T00:00:00Z`) + DAY - 3_600_000);
    for (const table of ['insight_day_users', 'insight_breakdowns']) {
      await runner.query(`UPDATE ${table} SET computed_at = $3 WHERE app_id = $1 AND day = $2::date`, [
        appId,
        day1,
        hourBeforeEnd,
      ]);
    }
    const open = await answers();
    expect(open.days.find((b) => b.start === day1)).toMatchObject({ final: false });
    const before = await versions();
    await compute();
    const after = await versions();
    // Only the rows' time of computation moved, and only on that day.
    expect(after[`s:${day1}`]).toBe(before[`s:${day1}`]);
    expect(ofDay(after, day2)).toEqual(ofDay(before, day2));
    const final = await answers();
    expect(final.days.find((b) => b.start === day1)).toMatchObject({ final: true });
    expect(final.days.map(({ final: _, ...rest }) => rest)).toEqual(
      open.days.map(({ final: _, ...rest }) => rest),
    );
    const [{ n }] = (await runner.query(
      `SELECT count(*)::int AS n FROM insight_breakdowns WHERE app_id = $1 AND day = $2::date AND computed_at < day_end`,
      [appId, day1],
    )) as { n: number }[];
    expect(n).toBe(0);
  });

  it('declaring a dimension computes every day again, with the new dimension', async () => {
    const before = await versions();
    await t.app.get(DimensionsService).set(appId, ['plan'], TEST_ACTOR);
    await compute();
    const after = await versions();
    for (const day of [day1, day2, day3]) {
      expect(after[`s:${day}`]).not.toBe(before[`s:${day}`]);
    }
    const plan = await get(
      `/api/v1/breakdown?appId=${appId}&fromDate=${day3}&toDate=${day1}&by=payload.plan`,
    );
    // The late event has no payload: the row of events without the key.
    expect(plan.map((r) => [r.value, r.events])).toEqual([
      ['free', 225],
      ['pro', 75],
      [null, 1],
    ]);
  });
});

describe('insights: the digests of a zone change', () => {
  const t = useTestApp({ ROLLUPS_ENABLED: 'false' });
  const now = Date.now();

  it('are built with the new set and swapped with it, so that the next computation keeps its days', async () => {
    const partitions = t.app.get(PartitionRepository);
    for (let d = 0; d <= 4; d++) await partitions.create(new Date(now - d * DAY));
    const appId = (await t.app.get(AppsService).create('Zone digests', TEST_ACTOR)).id;
    await seedEvents(t.db, appId, makeEvents(now));
    const rollups = t.app.get(RollupsService);
    await rollups.compute({ appId });
    const digests = async () =>
      (await t.db.query(
        `SELECT rezone, day::text AS day, encode(source, 'hex') AS source FROM insight_day_sources
          WHERE app_id = $1 ORDER BY rezone, day`,
        [appId],
      )) as { rezone: boolean; day: string; source: string }[];
    const utc = await digests();
    expect(utc.length).toBeGreaterThanOrEqual(3);

    const change = await rollups.setTimezone(appId, 'America/New_York', TEST_ACTOR);
    expect(change.recomputing).toBe(true);
    await rollups.run(Date.now(), 600_000);
    const zoned = await digests();
    expect(zoned.filter((d) => d.rezone)).toEqual([]);
    // Every day now has the New York day's window: no UTC digest is left, and each day has one.
    const utcSources = new Set(utc.map((d) => d.source));
    expect(zoned.filter((d) => utcSources.has(d.source))).toEqual([]);
    const [{ days }] = (await t.db.query(
      `SELECT array_agg(DISTINCT day::text ORDER BY day::text) AS days FROM insight_breakdowns WHERE app_id = $1`,
      [appId],
    )) as { days: string[] }[];
    expect(zoned.map((d) => d.day)).toEqual(days);

    const computedAt = async () =>
      (await t.db.query(
        `SELECT day::text AS day, min(computed_at)::text AS first, max(computed_at)::text AS last
           FROM insight_breakdowns WHERE app_id = $1 GROUP BY day ORDER BY day`,
        [appId],
      )) as { day: string; first: string; last: string }[];
    const written = await computedAt();
    await rollups.compute({ appId });
    expect(await digests()).toEqual(zoned);
    expect(await computedAt()).toEqual(written);
  });
});
