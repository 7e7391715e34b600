// The insight id packs are compacted after a computation once their table has grown well past
// what its rows hold: the rewrite keeps every entry, so the next computation finds every id
// numbered and the answers do not move. The computation runs the upkeep with its lock held and no
// transaction open (but not for an erasure, which is on the clock), and a failing upkeep leaves
// the computed days as they are.
import request from 'supertest';
import type { QueryRunner } from 'typeorm';
import { AppsService } from '@app/auth/apps.service';
import { InsightComputationRepository } from '@app/insights/insight-computation.repository';
import { InsightsStep } from '@app/insights/insights.step';
import { RollupsService } from '@app/rollups/rollups.service';
import { ROLLUP_LOCK_ID } from '@app/rollups/rollup-computation.repository';
import { PartitionRepository } from '@app/storage/partition.repository';
import { TEST_ACTOR, bearer, makeApiKey } from './factories';
import { seedEvents, SeedEvent } from './factories/events';
import { useTestApp } from './support/test-app';

const DAY = 86_400_000;

/** 600 events of 150 users and 300 sessions over the 6 days before today. */
function makeEvents(now: number): SeedEvent[] {
  return Array.from({ length: 600 }, (_, i) => {
    const ts = now - (1 + (i % 6)) * DAY + (i % 97) * 60_000;
    return {
      eventName: i % 3 ? 'Shop.viewed' : 'Cart.added',
      receivedAt: ts,
      eventTime: ts,
      anonymousUserId: `user-${(i * 7) % 150}`,
      sessionId: `s-${i % 300}`,
      platform: i % 2 ? 'iOS' : 'Android',
    };
  });
}

describe('insight id packs: compaction after a computation', () => {
  const t = useTestApp({ ROLLUPS_ENABLED: 'false' });
  const now = Date.now();
  let appId: string;
  let readKey: string;
  let repo: InsightComputationRepository;
  let runner: QueryRunner;

  const relfilenode = async () =>
    ((await runner.query(`SELECT pg_relation_filenode('insight_id_packs')::text AS f`)) as { f: string }[])[0]
      .f;
  const packs = () =>
    runner.query(`SELECT kind, pack, entries FROM insight_id_packs WHERE app_id = $1 ORDER BY kind, pack`, [
      appId,
    ]);
  const counters = () =>
    runner.query(`SELECT kind, next_no FROM insight_counters WHERE app_id = $1 ORDER BY kind`, [appId]);
  const weekUsers = async () => {
    const res = await request(t.http)
      .get(`/api/v1/active-users?appId=${appId}&range=7d&interval=total`)
      .set(bearer(readKey));
    expect(res.status).toBe(200);
    return res.body as { users: number }[];
  };

  beforeAll(async () => {
    const partitions = t.app.get(PartitionRepository);
    for (let d = 0; d <= 8; d++) await partitions.create(new Date(now - d * DAY));
    appId = (await t.app.get(AppsService).create('Compaction', TEST_ACTOR)).id;
    readKey = (await makeApiKey(t.app, [appId], ['rollups:read'])).key;
    await seedEvents(t.db, appId, makeEvents(now));
    await t.app.get(RollupsService).compute({ appId });
    repo = t.app.get(InsightComputationRepository);
    runner = t.db.createQueryRunner();
    await runner.connect();
  });

  afterAll(async () => {
    await runner?.release();
  });

  it('leaves the table as it is when compaction is off or the waste is under the slack', async () => {
    const file = await relfilenode();
    expect(await repo.compactIdPacks(runner, 0, 0)).toBeNull();
    // The default slack (8 MB) is far more than a test app's few pages.
    expect(await repo.compactIdPacks(runner, 100)).toBeNull();
    expect(await relfilenode()).toBe(file);
  });

  it('rewrites the table past the threshold and keeps every entry, so no id is numbered again', async () => {
    const [before, numbers, users] = [await packs(), await counters(), await weekUsers()];
    expect(numbers).toEqual([
      { kind: 's', next_no: 300 },
      { kind: 'u', next_no: 150 },
    ]);
    expect(users[0].users).toBe(150);
    const file = await relfilenode();

    const sizes = await repo.compactIdPacks(runner, 100, 0);
    expect(sizes).toEqual({ before: expect.any(Number), after: expect.any(Number) });
    expect(await relfilenode()).not.toBe(file);
    expect(await packs()).toEqual(before);

    await t.app.get(RollupsService).compute({ appId });
    expect(await counters()).toEqual(numbers);
    expect(await weekUsers()).toEqual(users);
  });

  it('runs after the days with the computation lock held and no transaction open', async () => {
    const step = t.app.get(InsightsStep);
    const seen: { inTransaction: boolean; locks: number }[] = [];
    const spy = jest.spyOn(step, 'afterDays').mockImplementation(async (r: QueryRunner) => {
      const [row] = (await r.query(
        `SELECT count(*)::int AS n FROM pg_locks
          WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid() AND objid = $1`,
        [ROLLUP_LOCK_ID],
      )) as { n: number }[];
      seen.push({ inTransaction: r.isTransactionActive, locks: row.n });
    });
    try {
      const result = await t.app.get(RollupsService).compute({ appId });
      expect(result.days).toBeGreaterThan(0);
      expect(seen).toEqual([{ inTransaction: false, locks: 1 }]);
    } finally {
      spy.mockRestore();
    }
  });

  it("an erasure's recomputation leaves the upkeep to the next run", async () => {
    const step = t.app.get(InsightsStep);
    const spy = jest.spyOn(step, 'afterDays');
    try {
      const day = new Date(now - DAY).toISOString().slice(0, 10);
      const result = await t.app.get(RollupsService).recomputeAfterRemoval(appId, [day]);
      expect(result.days).toBeGreaterThan(0);
      expect(spy).not.toHaveBeenCalled();
    } finally {
      spy.mockRestore();
    }
  });

  it('a failing upkeep leaves the computed days committed', async () => {
    const step = t.app.get(InsightsStep);
    const spy = jest.spyOn(step, 'afterDays').mockRejectedValue(new Error('disk full'));
    try {
      // Without their digests too: a day whose digest is unchanged keeps its rows as they are.
      await runner.query(`DELETE FROM insight_day_users WHERE app_id = $1`, [appId]);
      await runner.query(`DELETE FROM insight_day_sources WHERE app_id = $1`, [appId]);
      const result = await t.app.get(RollupsService).compute({ appId });
      expect(result.days).toBeGreaterThan(0);
      expect(spy).toHaveBeenCalledTimes(1);
      expect(await weekUsers()).toEqual([expect.objectContaining({ users: 150 })]);
    } finally {
      spy.mockRestore();
    }
  });
});
