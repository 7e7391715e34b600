import request from 'supertest';
import { AppsService } from '@app/auth/apps.service';
import { RollupsService } from '@app/rollups/rollups.service';
import { RezoneService } from '@app/rollups/rezone.service';
import { RollupComputationRepository } from '@app/rollups/rollup-computation.repository';
import { PartitionRepository } from '@app/storage/partition.repository';
import { DAY_MS, utcDateString } from '@app/common/time';
import { localDateString, localDayStart } from '@app/common/timezones';
import { addDays } from '@app/common/reads/time-params';
import { bearer, makeApiKey, makeIngestKey, postIngest, TEST_ACTOR } from './factories';
import { seedEvents } from './factories/events';
import { runTestCli } from './support/run-cli';
import { useTestApp } from './support/test-app';

interface Row {
  date: string;
  eventName: string | null;
  isTestMode: boolean;
  events: number;
  uniqueUsers: number;
  final: boolean;
  computedAt: number;
  timezone: string;
}

const NY = 'America/New_York';
const MIN = 60_000;
const HOUR = 60 * MIN;

describe('app time zones', () => {
  // Reads between every step of a recomputation: far more than the per-key read limits allow.
  const t = useTestApp({ READ_RATE_REQUESTS: '1000000', READ_TIME_MS_PER_SECOND: '1000000' });
  let service: RollupsService;

  beforeAll(() => {
    service = t.app.get(RollupsService);
  });

  async function tenantIn(zone: string) {
    const app = await t.app.get(AppsService).create(`tz-${zone}`, TEST_ACTOR, zone);
    const live = await makeIngestKey(t.app, app.id, 'live');
    const api = await makeApiKey(t.app, [app.id]);
    return { appId: app.id, liveKey: live.key, apiKey: api.key, app };
  }

  async function rollups(apiKey: string, query: Record<string, string>): Promise<Row[]> {
    const res = await request(t.http).get('/api/v1/rollups').query(query).set(bearer(apiKey));
    expect(res.status).toBe(200);
    return res.body as Row[];
  }

  /** The total rows (eventName null, live) as date → events. */
  function totals(rows: Row[]): Record<string, number> {
    return Object.fromEntries(rows.filter((r) => r.eventName === null).map((r) => [r.date, r.events]));
  }

  /** Creates the daily partitions of events for every UTC day touched by `instants`. */
  async function partitionsFor(instants: number[]) {
    const partitions = t.app.get(PartitionRepository);
    for (const day of new Set(instants.map((i) => utcDateString(i)))) {
      await partitions.create(new Date(`${day}T00:00:00Z`));
    }
  }

  async function seedAt(appId: string, instants: number[], name = 'App.opened') {
    await partitionsFor(instants);
    await seedEvents(
      t.db,
      appId,
      instants.map((ts, i) => ({ eventName: name, receivedAt: ts, ts, anonymousUserId: `u${i}` })),
    );
  }

  async function runUntilIdle() {
    for (let i = 0; i < 20; i++) {
      await service.run();
      const [{ n }] = (await t.db.query(`SELECT count(*)::int AS n FROM rollup_rezone_jobs`)) as {
        n: number;
      }[];
      const [{ m }] = (await t.db.query(`SELECT count(*)::int AS m FROM rollup_dirty`)) as { m: number }[];
      if (n === 0 && m === 0) return;
    }
    throw new Error('the computation did not settle');
  }

  it('an app in America/New_York counts events on both sides of local midnight on their local days', async () => {
    const tenant = await tenantIn(NY);
    const today = localDateString(Date.now(), NY);
    const yesterday = addDays(today, -1);
    const midnight = localDayStart(yesterday, NY);
    // Both instants fall on the same UTC day (local midnight is 04:00Z or 05:00Z).
    const before = midnight - 2 * MIN;
    const after = midnight + 2 * MIN;
    expect(utcDateString(before)).toBe(utcDateString(after));
    const res = await postIngest(t.http, tenant.liveKey, {
      events: [
        { eventName: 'App.opened', eventTime: before, anonymousUserId: 'a' },
        { eventName: 'App.opened', eventTime: after, anonymousUserId: 'b' },
        { eventName: 'App.opened', eventTime: after + MIN, anonymousUserId: 'c' },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body.accepted).toBe(3);
    // The marks ingest wrote name local days, in the app's zone.
    const marks = (await t.db.query(
      `SELECT day::text AS day, timezone FROM rollup_dirty WHERE app_id = $1 ORDER BY day`,
      [tenant.appId],
    )) as { day: string; timezone: string }[];
    expect(marks).toEqual([
      { day: addDays(yesterday, -1), timezone: NY },
      { day: yesterday, timezone: NY },
    ]);
    await runUntilIdle();
    const rows = await rollups(tenant.apiKey, { appId: tenant.appId, range: '7d' });
    expect(totals(rows)).toEqual({ [addDays(yesterday, -1)]: 1, [yesterday]: 2 });
    expect(rows.every((r) => r.timezone === NY)).toBe(true);
    // "today" is the local day: range=1d holds nothing from yesterday.
    expect(totals(await rollups(tenant.apiKey, { appId: tenant.appId, range: '1d' }))).toEqual({});
  });

  it('the 25-hour day 2026-11-01 and the 23-hour day 2026-03-08 hold exactly their events', async () => {
    const tenant = await tenantIn(NY);
    const at = (iso: string) => Date.parse(iso);
    await seedAt(tenant.appId, [
      at('2026-11-01T03:59:59.999Z'), // 23:59:59.999 EDT on 31 October
      at('2026-11-01T04:00:00.000Z'), // 00:00 EDT
      at('2026-11-01T05:30:00.000Z'), // 01:30 EDT
      at('2026-11-01T06:30:00.000Z'), // 01:30 EST, the repeated hour
      at('2026-11-02T04:59:59.999Z'), // 23:59:59.999 EST
      at('2026-11-02T05:00:00.000Z'), // 00:00 EST on 2 November
      at('2026-03-08T04:59:59.999Z'), // 23:59:59.999 EST on 7 March
      at('2026-03-08T05:00:00.000Z'), // 00:00 EST
      at('2026-03-08T06:59:59.999Z'), // 01:59:59.999 EST
      at('2026-03-08T07:00:00.000Z'), // 03:00 EDT: 02:00 to 03:00 does not exist
      at('2026-03-09T03:59:59.999Z'), // 23:59:59.999 EDT
      at('2026-03-09T04:00:00.000Z'), // 00:00 EDT on 9 March
    ]);
    await service.compute({ appId: tenant.appId, from: '2026-10-31', to: '2026-11-02' });
    await service.compute({ appId: tenant.appId, from: '2026-03-07', to: '2026-03-09' });
    const fall = await rollups(tenant.apiKey, {
      appId: tenant.appId,
      fromDate: '2026-10-31',
      toDate: '2026-11-02',
    });
    expect(totals(fall)).toEqual({ '2026-10-31': 1, '2026-11-01': 4, '2026-11-02': 1 });
    const spring = await rollups(tenant.apiKey, {
      appId: tenant.appId,
      fromDate: '2026-03-07',
      toDate: '2026-03-09',
    });
    expect(totals(spring)).toEqual({ '2026-03-07': 1, '2026-03-08': 4, '2026-03-09': 1 });
    expect([...fall, ...spring].every((r) => r.timezone === NY && r.final)).toBe(true);
  });

  it.each([
    // Asia/Kolkata is UTC+05:30 all year: 20 November starts at 18:30Z on the 19th.
    ['Asia/Kolkata', '2026-11-20', '2026-11-19T18:30:00.000Z'],
    // Pacific/Chatham is UTC+13:45 in its summer: 20 November starts at 10:15Z on the 19th.
    ['Pacific/Chatham', '2026-11-20', '2026-11-19T10:15:00.000Z'],
    // … and UTC+12:45 in its winter: 20 June starts at 11:15Z on the 19th.
    ['Pacific/Chatham', '2026-06-20', '2026-06-19T11:15:00.000Z'],
  ])('%s: the day %s starts at %s', async (zone, day, startIso) => {
    const tenant = await tenantIn(zone);
    const start = Date.parse(startIso);
    expect(localDayStart(day, zone)).toBe(start);
    await seedAt(tenant.appId, [start - 1, start, start + DAY_MS - HOUR, start + DAY_MS + 10 * HOUR]);
    const from = addDays(day, -1);
    const to = addDays(day, 1);
    await service.compute({ appId: tenant.appId, from, to });
    const rows = await rollups(tenant.apiKey, { appId: tenant.appId, fromDate: from, toDate: to });
    expect(totals(rows)).toEqual({ [from]: 1, [day]: 2, [to]: 1 });
  });

  it('final turns true at local midnight, not at UTC midnight', async () => {
    const ny = await tenantIn(NY);
    const utc = await tenantIn('UTC');
    const day = addDays(localDateString(Date.now(), NY), -3);
    const start = localDayStart(day, NY);
    await seedAt(ny.appId, [start + HOUR]);
    await seedAt(utc.appId, [Date.parse(`${day}T01:00:00Z`)]);
    await service.compute({ appId: ny.appId, from: day, to: day });
    await service.compute({ appId: utc.appId, from: day, to: day });
    await runUntilIdle();
    const utcEnd = Date.parse(`${addDays(day, 1)}T00:00:00Z`);
    const nyEnd = localDayStart(addDays(day, 1), NY);
    expect(nyEnd - utcEnd).toBeGreaterThanOrEqual(4 * HOUR);
    const setComputedAt = (appId: string, at: number) =>
      t.db.query(`UPDATE rollups SET computed_at = $2 WHERE app_id = $1`, [appId, new Date(at)]);
    const finals = async (tenant: { appId: string; apiKey: string }) =>
      (await rollups(tenant.apiKey, { appId: tenant.appId, fromDate: day, toDate: day })).map((r) => r.final);

    // Computed just after UTC midnight: final for the UTC app only.
    await setComputedAt(ny.appId, utcEnd + MIN);
    await setComputedAt(utc.appId, utcEnd + MIN);
    expect(await finals(ny)).toEqual([false, false]);
    expect(await finals(utc)).toEqual([true, true]);
    // Computed exactly at local midnight: final.
    await setComputedAt(ny.appId, nyEnd);
    expect(await finals(ny)).toEqual([true, true]);

    // The scheduled run finalises the day once it has ended locally, not before.
    await setComputedAt(ny.appId, utcEnd + MIN);
    const early = await service.run(utcEnd + 2 * MIN);
    expect(early.status).toBe('computed');
    expect(await finals(ny)).toEqual([false, false]);
    await service.run(nyEnd + MIN);
    expect(await finals(ny)).toEqual([true, true]);
  });

  it('two apps in different zones get their own days for the same instants', async () => {
    const ny = await tenantIn(NY);
    const tokyo = await tenantIn('Asia/Tokyo');
    // 12:00Z two days ago: 07:00 or 08:00 in New York, 21:00 in Tokyo, the same date;
    // 16:00Z: the same day in New York, the next day in Tokyo.
    const base = Date.parse(`${addDays(utcDateString(Date.now()), -2)}T12:00:00Z`);
    const events = [base, base + 4 * HOUR].map((eventTime, i) => ({
      eventName: 'A',
      eventTime,
      anonymousUserId: `u${i}`,
    }));
    for (const tenant of [ny, tokyo]) {
      expect((await postIngest(t.http, tenant.liveKey, { events })).status).toBe(200);
    }
    await runUntilIdle();
    const day = utcDateString(base);
    expect(totals(await rollups(ny.apiKey, { appId: ny.appId, range: '5d' }))).toEqual({ [day]: 2 });
    expect(totals(await rollups(tokyo.apiKey, { appId: tokyo.appId, range: '5d' }))).toEqual({
      [day]: 1,
      [addDays(day, 1)]: 1,
    });
  });

  describe('changing the zone', () => {
    it('recomputes every retained day; reads never mix zones; older days keep their rows and zone', async () => {
      const tenant = await tenantIn('UTC');
      const now = Date.now();
      const today = utcDateString(now);
      // Events at 20:00Z on each of the last four days: the next day in Tokyo (UTC+9).
      const recent = [1, 2, 3, 4].map((n) => Date.parse(`${addDays(today, -n)}T20:00:00Z`));
      // A day past retention: its events are gone, its rows stay.
      const old = Date.parse(`${addDays(today, -(t.config.eventRetentionDays + 20))}T20:00:00Z`);
      await seedAt(tenant.appId, [...recent, old]);
      await service.compute({ appId: tenant.appId });
      await t.db.query(`DELETE FROM events WHERE app_id = $1 AND ts < $2`, [
        tenant.appId,
        new Date(now - t.config.eventRetentionDays * DAY_MS),
      ]);
      const range = { appId: tenant.appId, fromDate: addDays(today, -120), toDate: addDays(today, 1) };
      const before = await rollups(tenant.apiKey, range);
      expect(new Set(before.map((r) => r.timezone))).toEqual(new Set(['UTC']));

      await runUntilIdle(); // no other change in the way of the steps below
      const change = await service.setTimezone(tenant.appId, 'Asia/Tokyo', TEST_ACTOR);
      expect(change).toMatchObject({ timezone: 'Asia/Tokyo', previousTimezone: 'UTC', recomputing: true });
      const late = Date.parse(`${addDays(today, -1)}T21:00:00Z`);
      // Build the new set one day at a time, reading between the days.
      const rezone = t.app.get(RezoneService);
      const computation = t.app.get(RollupComputationRepository);
      const seen = new Set<string>();
      for (let step = 0; step < 200; step++) {
        let budget = 1;
        const done = await computation.withComputationLock((runner) =>
          rezone.step(runner, Date.now(), () => budget-- <= 0),
        );
        const rows = await rollups(tenant.apiKey, range);
        const zones = new Set(rows.filter((r) => r.date >= addDays(today, -60)).map((r) => r.timezone));
        expect(zones.size).toBe(1);
        seen.add([...zones][0]);
        if (done.locked && done.value.swapped) break;
        if (step === 3) {
          // An event ingested while the change runs: its mark is consumed at once (the served
          // set), and the new set counts it when it reaches its day.
          const sent = await postIngest(t.http, tenant.liveKey, {
            events: [{ eventName: 'B', eventTime: late }],
          });
          expect(sent.status).toBe(200);
          expect((await service.run(Date.now(), 0)).days).toBeGreaterThanOrEqual(1);
        }
      }
      expect([...seen]).toEqual(['UTC', 'Asia/Tokyo']);
      const after = await rollups(tenant.apiKey, range);
      const expected: Record<string, number> = { [utcDateString(old)]: 1 };
      for (const instant of [...recent, late]) {
        const day = localDateString(instant, 'Asia/Tokyo');
        expected[day] = (expected[day] ?? 0) + 1;
      }
      expect(totals(after)).toEqual(expected);
      for (const row of after) {
        expect(row.timezone).toBe(row.date === utcDateString(old) ? 'UTC' : 'Asia/Tokyo');
      }
      const [app] = (await t.db.query(`SELECT timezone, rollup_timezone FROM apps WHERE id = $1`, [
        tenant.appId,
      ])) as { timezone: string; rollup_timezone: string }[];
      expect(app).toEqual({ timezone: 'Asia/Tokyo', rollup_timezone: 'Asia/Tokyo' });
      const audit = (await t.db.query(
        `SELECT action, details FROM audit_log WHERE app_id = $1 AND action = 'app.timezone_changed'`,
        [tenant.appId],
      )) as { action: string; details: Record<string, unknown> }[];
      expect(audit).toEqual([
        {
          action: 'app.timezone_changed',
          details: expect.objectContaining({ from: 'UTC', to: 'Asia/Tokyo' }),
        },
      ]);
    });

    it('progress survives a restart: the next run resumes after the last day built', async () => {
      const tenant = await tenantIn('UTC');
      await runUntilIdle(); // no other change in the way of the steps below
      await service.setTimezone(tenant.appId, 'Europe/Berlin', TEST_ACTOR);
      const rezone = t.app.get(RezoneService);
      const computation = t.app.get(RollupComputationRepository);
      const nextDay = async () =>
        (
          (await t.db.query(`SELECT next_day::text AS d FROM rollup_rezone_jobs WHERE app_id = $1`, [
            tenant.appId,
          ])) as { d: string }[]
        )[0]?.d;
      const first = await nextDay();
      let budget = 3;
      await computation.withComputationLock((runner) => rezone.step(runner, Date.now(), () => budget-- <= 0));
      expect(await nextDay()).toBe(addDays(first, 3));
      await runUntilIdle();
      expect(await nextDay()).toBeUndefined();
      const res = await request(t.http).get('/api/v1/key').set(bearer(tenant.apiKey));
      expect(res.body.apps).toEqual([
        { id: tenant.appId, name: tenant.app.name, timezone: 'Europe/Berlin', dimensions: [] },
      ]);
    });

    it('ingest takes the zone from its key cache; marks named in the old zone land on the new days', async () => {
      const tenant = await tenantIn('UTC');
      const base = Date.parse(`${addDays(utcDateString(Date.now()), -2)}T12:00:00Z`);
      const send = async (eventTime: number) =>
        expect(
          (await postIngest(t.http, tenant.liveKey, { events: [{ eventName: 'A', eventTime }] })).status,
        ).toBe(200);
      await send(base); // caches the key, with UTC
      await service.setTimezone(tenant.appId, 'Asia/Tokyo', TEST_ACTOR);
      // 20:00Z: the same UTC day, the next day in Tokyo. The cached key still says UTC.
      await send(base + 8 * HOUR);
      const marks = (await t.db.query(
        `SELECT DISTINCT day::text AS day, timezone FROM rollup_dirty WHERE app_id = $1`,
        [tenant.appId],
      )) as { day: string; timezone: string }[];
      expect(marks).toEqual([{ day: utcDateString(base), timezone: 'UTC' }]);
      await runUntilIdle();
      const rows = await rollups(tenant.apiKey, { appId: tenant.appId, range: '5d' });
      expect(rows.every((r) => r.timezone === 'Asia/Tokyo')).toBe(true);
      expect(totals(rows)).toEqual({ [utcDateString(base)]: 1, [addDays(utcDateString(base), 1)]: 1 });
    });

    it('setting the zone the rollups are already in starts no recomputation', async () => {
      const tenant = await tenantIn(NY);
      const change = await service.setTimezone(tenant.appId, NY, TEST_ACTOR);
      expect(change).toEqual({
        appId: tenant.appId,
        timezone: NY,
        previousTimezone: NY,
        recomputing: false,
        fromDate: null,
      });
    });
  });

  describe('CLI', () => {
    const cli = runTestCli;

    it('apps create --timezone, apps list and apps set-timezone show the zone', async () => {
      const created = await cli(
        'apps',
        'create',
        '--name',
        'Berlin shop',
        '--timezone',
        'Europe/Berlin',
        '--json',
      );
      expect(created.code).toBe(0);
      const app = JSON.parse(created.stdout);
      expect(app).toMatchObject({ name: 'Berlin shop', timezone: 'Europe/Berlin' });
      const list = await cli('apps', 'list', '--json');
      expect(JSON.parse(list.stdout)).toContainEqual(
        expect.objectContaining({ id: app.id, timezone: 'Europe/Berlin' }),
      );
      // Names Intl lists are stored in their usual spelling.
      const set = await cli('apps', 'set-timezone', app.id, 'asia/tokyo', '--json');
      expect(set.code).toBe(0);
      expect(JSON.parse(set.stdout)).toMatchObject({
        appId: app.id,
        timezone: 'Asia/Tokyo',
        previousTimezone: 'Europe/Berlin',
        recomputing: true,
      });
    });

    it.each([
      ['apps', 'create', '--name', 'x', '--timezone', 'Mars/Olympus_Mons'],
      ['apps', 'set-timezone', '0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c', 'Mars/Olympus_Mons'],
      ['apps', 'set-timezone', '0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c', '+05:00'],
    ])('an unknown zone is a usage error naming it: %s %s …', async (...argv) => {
      const run = await cli(...argv);
      expect(run.code).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr).toContain(argv[argv.length - 1]);
      expect(run.stderr.trim().split('\n')).toHaveLength(1);
    });
  });
});
