// The day's insights statement on a partition that was never analyzed (filled faster than
// autovacuum looks at it): estimated at a row or two, its events would be joined to their ids'
// numbers by nested loops, quadratic in the day's events. The statement runs with nested loops off,
// so that those joins are hashed whatever the estimates, and the day still comes out exact.
import request from 'supertest';
import type { QueryRunner } from 'typeorm';
import { AppsService } from '@app/auth/apps.service';
import { InsightDayRepository, withoutNestedLoops } from '@app/insights/insight-day.repository';
import { RollupsService } from '@app/rollups/rollups.service';
import { PartitionRepository } from '@app/storage/partition.repository';
import { TEST_ACTOR, bearer, makeApiKey } from './factories';
import { seedEvents } from './factories/events';
import { useTestApp } from './support/test-app';

const DAY = 86_400_000;

describe('insights: the day statement without statistics', () => {
  const t = useTestApp({ ROLLUPS_ENABLED: 'false' });
  // A UTC day well ahead, whose partition no other suite makes, kept from autovacuum.
  const start = Math.floor(Date.now() / DAY) * DAY + 40 * DAY;
  const day = new Date(start).toISOString().slice(0, 10);
  const partition = `events_p${day.replaceAll('-', '')}`;
  let appId: string;
  let runner: QueryRunner;

  beforeAll(async () => {
    await t.app.get(PartitionRepository).create(new Date(start));
    await t.db.query(`ALTER TABLE ${partition} SET (autovacuum_enabled = false)`);
    appId = (await t.app.get(AppsService).create('Unanalyzed', TEST_ACTOR)).id;
    await seedEvents(
      t.db,
      appId,
      Array.from({ length: 400 }, (_, i) => ({
        eventName: i % 2 ? 'Shop.viewed' : 'Cart.added',
        receivedAt: start + i * 60_000,
        anonymousUserId: `user-${i % 300}`,
        sessionId: `s-${i}`,
        platform: i % 3 ? 'iOS' : 'Android',
      })),
    );
    runner = t.db.createQueryRunner();
    await runner.connect();
  });

  afterAll(async () => {
    await runner?.release();
  });

  async function plan(settings: 'as planned' | 'without nested loops'): Promise<string> {
    const { text, params } = t.app
      .get(InsightDayRepository)
      .daySql(appId, { day, zone: 'UTC', start, end: start + DAY, rezone: false }, [], 1000);
    const explain = () => runner.query(`EXPLAIN ${text}`, params) as Promise<{ 'QUERY PLAN': string }[]>;
    await runner.startTransaction();
    try {
      const rows = settings === 'as planned' ? await explain() : await withoutNestedLoops(runner, explain);
      return rows.map((r) => r['QUERY PLAN']).join('\n');
    } finally {
      await runner.rollbackTransaction();
    }
  }

  it('the partition has no statistics, so the planner would loop over the events', async () => {
    const [stats] = (await runner.query(`SELECT count(*)::int AS n FROM pg_stats WHERE tablename = $1`, [
      partition,
    ])) as { n: number }[];
    expect(stats.n).toBe(0);
    expect(await plan('as planned')).toMatch(/Nested Loop Left Join/);
  });

  it('runs with its joins hashed', async () => {
    const text = await plan('without nested loops');
    expect(text).not.toMatch(/Nested Loop Left Join/);
    expect(text).toMatch(/Hash (Left|Right) Join/);
  });

  it('computes the day exactly', async () => {
    await t.app.get(RollupsService).compute({ appId, from: day, to: day });
    const key = (await makeApiKey(t.app, [appId], ['rollups:read'])).key;
    const res = await request(t.http)
      .get(`/api/v1/active-users?appId=${appId}&fromDate=${day}&toDate=${day}&interval=total`)
      .set(bearer(key));
    expect(res.status).toBe(200);
    expect(res.body).toEqual([expect.objectContaining({ users: 300 })]);
    const breakdown = await request(t.http)
      .get(`/api/v1/breakdown?appId=${appId}&by=platform&fromDate=${day}&toDate=${day}`)
      .set(bearer(key));
    expect(breakdown.status).toBe(200);
    expect(breakdown.body).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ value: 'iOS', events: 266, sessions: 266 }),
        expect.objectContaining({ value: 'Android', events: 134, sessions: 134 }),
      ]),
    );
  });
});
