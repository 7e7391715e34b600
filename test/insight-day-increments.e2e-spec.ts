// A day that gained events since its insight rows were computed takes those events alone: its
// rows must then be what computing the whole day writes. Random late events go to random days
// (new and known users, values kept, folded past the value bound and never seen, float values,
// test events, a name the day never had); after each round the rows are compared, byte for byte,
// with those of the whole day computed again. A late event whose id is below the day's largest
// (an ingest transaction that committed late) computes the day whole.
import request from 'supertest';
import type { QueryRunner } from 'typeorm';
import { AppsService } from '@app/auth/apps.service';
import { DimensionsService } from '@app/insights/dimensions.service';
import { RollupsService } from '@app/rollups/rollups.service';
import { PartitionRepository } from '@app/storage/partition.repository';
import { TEST_ACTOR } from './factories';
import { seedEvents, SeedEvent } from './factories/events';
import { sample } from './support/harness';
import { useTestApp } from './support/test-app';

const DAY = 86_400_000;

/** A small deterministic generator (mulberry32), so that a failure can be replayed. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

describe('insights: a day that gained events takes them alone', () => {
  // Four values a day and dimension keep their rows: platforms and versions fold into `other`.
  const t = useTestApp({ ROLLUPS_ENABLED: 'false', BREAKDOWN_MAX_VALUES: '4' });
  const now = Date.now();
  const next = random(20261128);
  const pick = <T>(values: readonly T[]): T => values[Math.floor(next() * values.length)];
  let appId: string;
  let runner: QueryRunner;

  const event = (day: number, users: number): SeedEvent => {
    const ts = now - day * DAY + Math.floor(next() * 3_600_000);
    return {
      eventName: pick(['Shop.viewed', 'Cart.added', 'Order.paid']),
      receivedAt: ts,
      eventTime: ts,
      anonymousUserId: next() < 0.1 ? null : `user-${Math.floor(next() * users)}`,
      sessionId: next() < 0.2 ? null : `s-${Math.floor(next() * users * 2)}`,
      isTestMode: next() < 0.15,
      platform: pick(['iOS', 'Android', 'web', null]),
      appVersion: pick(['1.0', '1.1', '1.2', '2.0', '2.1', '3.0']),
      floatValue: next() < 0.4 ? Math.round(next() * 1e6) / 1e3 + 0.1 : null,
      payload: { plan: pick(['free', 'pro', 'team']) },
    };
  };

  /** Every insight row of the app but its time of computation, as text, sorted. */
  const contents = async (): Promise<string[]> => {
    const rows = (await runner.query(
      `SELECT concat_ws('|', 'u', day, is_test_mode, event_name, users::text) AS r
         FROM insight_day_users WHERE app_id = $1
       UNION ALL
       SELECT concat_ws('|', 'b', day, dimension, is_test_mode, kind, value, events, fv_count, fv_sum, fv_min,
                        fv_max, encode(users, 'hex'), encode(sessions, 'hex'))
         FROM insight_breakdowns WHERE app_id = $1
       ORDER BY 1`,
      [appId],
    )) as { r: string }[];
    return rows.map((row) => row.r);
  };
  const outcomes = async () => {
    const text = (await request(t.http).get('/metrics').expect(200)).text;
    const days = (outcome: string) => sample(text, 'tally_insight_days_total', { outcome }) ?? 0;
    return { computed: days('computed'), added: days('added'), kept: days('kept') };
  };
  const compute = () => t.app.get(RollupsService).compute({ appId });
  /** The rows of every day computed whole from the events as they are now. */
  const computedWhole = async (): Promise<string[]> => {
    await runner.query(`DELETE FROM insight_day_sources WHERE app_id = $1`, [appId]);
    await compute();
    return contents();
  };

  beforeAll(async () => {
    const partitions = t.app.get(PartitionRepository);
    for (let d = 0; d <= 4; d++) await partitions.create(new Date(now - d * DAY));
    appId = (await t.app.get(AppsService).create('Days that grow', TEST_ACTOR)).id;
    await t.app.get(DimensionsService).set(appId, ['plan'], TEST_ACTOR);
    await seedEvents(
      t.db,
      appId,
      Array.from({ length: 240 }, (_, i) => event(1 + (i % 3), 50)),
    );
    await compute();
    runner = t.db.createQueryRunner();
    await runner.connect();
  });

  afterAll(async () => {
    await runner?.release();
  });

  it('gives the rows of the whole day, round after round of late events', async () => {
    let added = 0;
    let computed = 0;
    for (let round = 0; round < 12; round++) {
      const late = Array.from({ length: 1 + Math.floor(next() * 6) }, () =>
        // Known users mostly, new ones too.
        event(1 + Math.floor(next() * 3), 70),
      );
      if (round === 5) late.push({ ...event(2, 50), eventName: 'Trial.started' });
      await seedEvents(t.db, appId, late);
      const before = await outcomes();
      await compute();
      const after = await outcomes();
      added += after.added - before.added;
      computed += after.computed - before.computed;
      const rows = await contents();
      expect(rows.length).toBeGreaterThan(20);
      expect(rows).toEqual(await computedWhole());
    }
    // Both ways were taken: events added alone, and days whose new values the bound could not
    // place computed whole.
    expect(added).toBeGreaterThan(3);
    expect(computed).toBeGreaterThan(0);
  });

  it('adds a name the day never had as a user set of its own', async () => {
    const ts = now - 3 * DAY + 60_000;
    const day = new Date(ts).toISOString().slice(0, 10);
    // A version the day keeps a row of: one folded into `other` would need the whole day.
    const [{ value }] = (await runner.query(
      `SELECT value FROM insight_breakdowns
        WHERE app_id = $1 AND day = $2::date AND dimension = 'appVersion' AND kind = 0 LIMIT 1`,
      [appId, day],
    )) as { value: string }[];
    await seedEvents(t.db, appId, [
      {
        eventName: 'Invite.sent',
        receivedAt: ts,
        eventTime: ts,
        anonymousUserId: 'user-1',
        platform: 'iOS',
        appVersion: value,
        payload: { plan: 'pro' },
      },
    ]);
    const before = await outcomes();
    await compute();
    expect((await outcomes()).added - before.added).toBe(1);
    const rows = await contents();
    expect(rows.filter((r) => r.startsWith(`u|${day}|f|Invite.sent|`))).toHaveLength(1);
    expect(rows).toEqual(await computedWhole());
  });

  it('computes the day whole when it more than doubled', async () => {
    const start = Math.floor((now - 2 * DAY) / DAY) * DAY;
    const [{ n }] = (await runner.query(
      `SELECT count(*)::int AS n FROM events WHERE app_id = $1 AND ts >= $2 AND ts < $3`,
      [appId, new Date(start), new Date(start + DAY)],
    )) as { n: number }[];
    const [{ value }] = (await runner.query(
      `SELECT value FROM insight_breakdowns
        WHERE app_id = $1 AND day = $2::date AND dimension = 'appVersion' AND kind = 0 LIMIT 1`,
      [appId, new Date(start).toISOString().slice(0, 10)],
    )) as { value: string }[];
    // One more event than the day held, each of values the day keeps rows of.
    const kept = Array.from({ length: n + 1 }, (_, i) => {
      const ts = start + 60_000 + i;
      return { ...event(2, 50), receivedAt: ts, eventTime: ts, appVersion: value, platform: 'iOS' };
    });
    await seedEvents(t.db, appId, kept);
    const before = await outcomes();
    await compute();
    const after = await outcomes();
    expect([after.computed - before.computed, after.added - before.added]).toEqual([1, 0]);
    expect(await contents()).toEqual(await computedWhole());
  });

  it('computes the day whole when an event below its largest id comes late', async () => {
    const ts = now - 1 * DAY + 120_000;
    const [id] = await seedEvents(t.db, appId, [
      { eventName: 'Shop.viewed', receivedAt: ts, eventTime: ts, anonymousUserId: 'user-2', platform: 'iOS' },
    ]);
    // As if its ingest transaction had taken its id before the day's last computation and
    // committed after it.
    await runner.query(`UPDATE events SET id = -id WHERE id = $1`, [id]);
    const before = await outcomes();
    await compute();
    const after = await outcomes();
    expect([after.computed - before.computed, after.added - before.added]).toEqual([1, 0]);
    expect(await contents()).toEqual(await computedWhole());
  });
});
