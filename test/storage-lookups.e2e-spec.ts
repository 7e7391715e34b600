import { Client } from 'pg';
import request from 'supertest';
import type { DataSource } from 'typeorm';
import { DAY_MS as DAY, utcDateString as dayOf } from '@app/common/time';
import { PartitionMaintenanceService } from '@app/storage/partition-maintenance.service';
import { PartitionRepository } from '@app/storage/partition.repository';
import { RollupsService } from '@app/rollups/rollups.service';
import { bearer, makeTenant } from './factories';
import { otherDatabase, recreateDatabase } from './support/databases';
import { waitFor } from './support/harness';
import { startTestApp, testDatabaseUrl, useTestApp } from './support/test-app';

type Tenant = Awaited<ReturnType<typeof makeTenant>>;

const partition = (t0: number) => `events_p${dayOf(t0).replace(/-/g, '')}`;

async function validIndexes(db: DataSource, table: string): Promise<string[]> {
  const rows = (await db.query(
    `SELECT c.relname AS name FROM pg_index i
       JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class r ON r.oid = i.indrelid
      WHERE r.relname = $1 AND i.indisvalid`,
    [table],
  )) as { name: string }[];
  return rows.map((r) => r.name);
}

/** How many times PostgreSQL has scanned an index, once this backend's view of the counters is fresh. */
async function indexScans(db: DataSource, index: string): Promise<number> {
  const [row] = (await db.query(
    `SELECT idx_scan::int AS n FROM pg_stat_user_indexes WHERE indexrelname = $1`,
    [index],
  )) as { n: number }[];
  return row?.n ?? 0;
}

/**
 * The plan, with its run-time counts, of the events list's query for one filter of today's
 * rows, planned as the read path plans it (src/events/event.repository.ts).
 */
async function lookupPlan(db: DataSource, appId: string, column: string, value: string, since: number) {
  const [row] = (await db.query(
    `EXPLAIN (ANALYZE, FORMAT JSON) SELECT id FROM events
      WHERE app_id = $1 AND ${column} = $2 AND ts >= $3 AND received_at > '-infinity'::timestamptz
      ORDER BY received_at DESC, id DESC LIMIT 1000`,
    [appId, value, new Date(since).toISOString()],
  )) as { 'QUERY PLAN': [{ Plan: PlanNode }] }[];
  const nodes: PlanNode[] = [];
  const walk = (n: PlanNode) => {
    nodes.push(n);
    n.Plans?.forEach(walk);
  };
  walk(row['QUERY PLAN'][0].Plan);
  return nodes;
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

/**
 * The plan reads today's partition through its lookup index, never whole. The other days'
 * partitions are the planner's to read as it likes: one that is empty, once autovacuum has
 * analysed it, is cheapest to scan.
 */
function expectLookupIndex(nodes: PlanNode[], index: string, today: string): void {
  expect(nodes.map((n) => n['Index Name'])).toContain(index);
  const wholeReads = nodes.filter((n) => n['Node Type'] === 'Seq Scan').map((n) => n['Relation Name']);
  expect(wholeReads).not.toContain(today);
}

/** Rows that today's lookup index could not rule out and the recheck dropped. */
const recheckedRows = (nodes: PlanNode[]) =>
  nodes.reduce((sum, n) => sum + (n['Rows Removed by Index Recheck'] ?? 0), 0);

/**
 * 40,000 events today, written as ingest writes them: 4,000 sessions of 10 events in a row, as a
 * session's events arrive together, and 1,000 users whose events are spread over the whole
 * time. Analysed, as autovacuum keeps a day being written.
 */
async function fillToday(db: DataSource, appId: string, prefix: string, now: number): Promise<void> {
  await db.query(
    `INSERT INTO events (app_id, ts, received_at, event_name, event_id, anonymous_user_id, session_id,
                         is_test_mode)
     SELECT $1::uuid, t, t, 'Screen.viewed', $3 || g, 'u' || (g % 1000), 's' || (g / 10), false
       FROM generate_series(1, 40000) AS g, LATERAL (SELECT $2::timestamptz - g * interval '1 ms' AS t) x`,
    [appId, new Date(now).toISOString(), prefix],
  );
  await db.query(`ANALYZE ${partition(now)}`);
}

describe('user and session lookups on the days ingest writes', () => {
  // A database of its own: the planner weighs the lookup index by the size of today's whole
  // partition, which the rows of the other suites would otherwise grow, depending on the order
  // the suites ran in.
  const database = 'tally_lookups';
  beforeAll(() => recreateDatabase(database));
  const env = {
    DATABASE_URL: otherDatabase(database),
    INGEST_MAX_EVENT_AGE_DAYS: '7',
    PARTITIONS_AHEAD_DAYS: '3',
    // Summaries only when a test asks for them.
    LOOKUP_SUMMARY_INTERVAL_MS: '0',
  };
  const t = useTestApp(env);
  beforeAll(() => t.app.get(PartitionMaintenanceService).pendingLookups);

  /** Reads the tenant's events whose `field` is `value`: `count` of them, and none with another. */
  async function expectOnly(tenant: Tenant, field: string, value: string, count: number, limit = 1000) {
    const res = await request(t.http)
      .get('/api/v1/events')
      .query({ appId: tenant.appId, [field]: value, limit })
      .set(bearer(tenant.apiKey));
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(count);
    expect(new Set(res.body.map((e: Record<string, unknown>) => e[field]))).toEqual(new Set([value]));
  }

  it('creates today and the days ahead with a lookup index, and ended days without one', async () => {
    const now = Date.now();
    for (let n = 0; n <= 3; n++) {
      const name = partition(now + n * DAY);
      expect(await validIndexes(t.db, name)).toContain(`${name}_lookup`);
    }
    const [{ method }] = (await t.db.query(
      `SELECT a.amname AS method FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE c.relname = $1`,
      [`${partition(now)}_lookup`],
    )) as { method: string }[];
    expect(method).toBe('brin');
    const yesterday = partition(now - DAY);
    await t.app.get(PartitionMaintenanceService).run(now);
    const indexes = await validIndexes(t.db, yesterday);
    expect(indexes).toEqual(
      expect.arrayContaining([`${yesterday}_user`, `${yesterday}_session`, `${yesterday}_name`]),
    );
    expect(indexes).not.toContain(`${yesterday}_lookup`);
  });

  it('leaves the first range of a new partition without a summary, so its first inserts cost no index work', async () => {
    const tenant = await makeTenant(t.app);
    const ahead = Date.now() + 2 * DAY;
    // 100 events on an empty day ahead: they all land in its first range. Had building the
    // index summarized that range as empty, each of them would have rewritten its summary.
    await t.db.query(
      `INSERT INTO events (app_id, ts, received_at, event_name, event_id, session_id, is_test_mode)
       SELECT $1::uuid, $2::timestamptz, now(), 'Screen.viewed', 'first.' || g, 'first-' || g, false
         FROM generate_series(1, 100) AS g`,
      [tenant.appId, new Date(ahead).toISOString()],
    );
    // brin_summarize_range answers 1 where it had to summarize the range: it had no summary.
    const [{ n }] = (await t.db.query(`SELECT brin_summarize_range($1::regclass, 0) AS n`, [
      `${partition(ahead)}_lookup`,
    ])) as { n: string }[];
    expect(Number(n)).toBe(1);
  });

  it('needs no extension: the migrations leave the bloom extension dropped', async () => {
    const extensions = (await t.db.query(`SELECT extname FROM pg_extension`)) as { extname: string }[];
    expect(extensions.map((e) => e.extname)).not.toContain('bloom');
  });

  it('answers sessionId and anonymousUserId reads of today through the lookup index', async () => {
    const tenant = await makeTenant(t.app);
    const now = Date.now();
    await fillToday(t.db, tenant.appId, 'lookup.', now);
    await t.app.get(PartitionMaintenanceService).summarizeLookups(1000);
    const index = `${partition(now)}_lookup`;
    const scansBefore = await indexScans(t.db, index);

    await expectOnly(tenant, 'sessionId', 's17', 10);
    await expectOnly(tenant, 'anonymousUserId', 'u17', 40);

    // The two reads went through the index: the server's read connections report their
    // counters when they go idle, within PostgreSQL's ten-second idle flush.
    await waitFor(async () => (await indexScans(t.db, index)) >= scansBefore + 2, {
      timeoutMs: 15_000,
      intervalMs: 100,
      what: 'the two index scans in pg_stat_user_indexes',
    });

    // The plan the read path gets. Once summarized, a session's lookup reads the range or two
    // that hold its events, not the day's 40,000 rows.
    for (const [column, value] of [
      ['session_id', 's17'],
      ['anonymous_user_id', 'u17'],
    ]) {
      const nodes = await lookupPlan(t.db, tenant.appId, column, value, now - 60 * 60_000);
      expectLookupIndex(nodes, index, partition(now));
      if (column === 'session_id') expect(recheckedRows(nodes)).toBeLessThan(10_000);
    }
  });

  it('answers eventName reads of today: a rare name through the lookup index, a common one from the newest-first index', async () => {
    const tenant = await makeTenant(t.app);
    const now = Date.now();
    await fillToday(t.db, tenant.appId, 'names.', now);
    // 20 events of a rare name, arrived together after the others.
    await t.db.query(
      `INSERT INTO events (app_id, ts, received_at, event_name, is_test_mode)
       SELECT $1::uuid, $2::timestamptz + g * interval '1 ms', $2::timestamptz + g * interval '1 ms',
              'Purchase.refunded', false
         FROM generate_series(1, 20) AS g`,
      [tenant.appId, new Date(now).toISOString()],
    );
    await t.db.query(`ANALYZE ${partition(now)}`);
    await t.app.get(PartitionMaintenanceService).summarizeLookups(1000);
    // No B-tree leads with event_name on a day being written.
    const [{ trees }] = (await t.db.query(
      `SELECT count(*)::int AS trees FROM pg_index i JOIN pg_attribute a
          ON a.attrelid = i.indrelid AND a.attnum = i.indkey[1]
        WHERE i.indrelid = $1::regclass AND a.attname = 'event_name'`,
      [partition(now)],
    )) as { trees: number }[];
    expect(trees).toBe(0);

    await expectOnly(tenant, 'eventName', 'Purchase.refunded', 20);
    await expectOnly(tenant, 'eventName', 'Screen.viewed', 50, 50);

    const index = `${partition(now)}_lookup`;
    const rarePlan = await lookupPlan(
      t.db,
      tenant.appId,
      'event_name',
      'Purchase.refunded',
      now - 60 * 60_000,
    );
    expectLookupIndex(rarePlan, index, partition(now));
    expect(recheckedRows(rarePlan)).toBeLessThan(10_000);
    const commonPlan = await lookupPlan(t.db, tenant.appId, 'event_name', 'Screen.viewed', now - 60 * 60_000);
    expect(commonPlan.map((n) => n['Index Name'])).not.toContain(index);
    expect(commonPlan.map((n) => n['Node Type'])).toContain('Index Scan');
  });

  it('summarizes the ranges ingest has filled, and not the ones it is still filling', async () => {
    const tenant = await makeTenant(t.app);
    const now = Date.now();
    const maintenance = t.app.get(PartitionMaintenanceService);
    await maintenance.summarizeLookups(1000);
    await fillToday(t.db, tenant.appId, 'summary.', now);

    // Not summarized yet: the index cannot rule out any new range, and every new row is read.
    const before = await lookupPlan(t.db, tenant.appId, 'session_id', 's17', now - 60 * 60_000);
    expect(recheckedRows(before)).toBeGreaterThan(39_000);

    const { ranges, skipped } = await maintenance.summarizeLookups(1000);
    expect(skipped).toEqual([]);
    expect(ranges).toBeGreaterThan(10);
    const after = await lookupPlan(t.db, tenant.appId, 'session_id', 's17', now - 60 * 60_000);
    expect(recheckedRows(after)).toBeLessThan(10_000);
    // Nothing new since: a second pass has nothing to do.
    expect(await maintenance.summarizeLookups(1000)).toEqual({ ranges: 0, skipped: [] });

    // The last two ranges of the table are left without a summary, the one before them has one.
    // (brin_summarize_range answers how many ranges it had to summarize.)
    const today = partition(now);
    const [{ blocks }] = (await t.db.query(
      `SELECT pg_relation_size($1::regclass) / current_setting('block_size')::int AS blocks`,
      [today],
    )) as { blocks: string }[];
    const last = Math.floor((Number(blocks) - 1) / 8) * 8;
    const summarize = async (block: number) =>
      (
        (await t.db.query(`SELECT brin_summarize_range($1::regclass, $2) AS n`, [
          `${today}_lookup`,
          block,
        ])) as { n: string }[]
      )[0].n;
    expect(Number(await summarize(last - 16))).toBe(0);
    expect(Number(await summarize(last - 8))).toBe(1);
    expect(Number(await summarize(last))).toBe(1);
  });

  it('leaves a partition whose table lock is held to the next pass', async () => {
    const today = partition(Date.now());
    // Ranges to summarize.
    await fillToday(t.db, (await makeTenant(t.app)).appId, 'locked.', Date.now());
    const holder = new Client({ connectionString: otherDatabase(database) });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      // What autovacuum or an index build holds while it works on the partition.
      await holder.query(`LOCK TABLE ${today} IN SHARE UPDATE EXCLUSIVE MODE`);
      // The pass returns while the lock is still held: it did not queue behind it (that would
      // hang here until the ROLLBACK below), and says what it left.
      const pass = await t.app.get(PartitionMaintenanceService).summarizeLookups(50);
      expect(pass.skipped).toEqual([`${today}_lookup`]);
      expect(pass.ranges).toBe(0);
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
    // The next pass, with the lock free, does what was left.
    const next = await t.app.get(PartitionMaintenanceService).summarizeLookups(1000);
    expect(next.skipped).toEqual([]);
    expect(next.ranges).toBeGreaterThan(10);
  });

  it('summarizes on its own every LOOKUP_SUMMARY_INTERVAL_MS', async () => {
    const other = await startTestApp({ ...env, LOOKUP_SUMMARY_INTERVAL_MS: '100' });
    try {
      const tenant = await makeTenant(t.app);
      const now = Date.now();
      await fillToday(t.db, tenant.appId, 'scheduled.', now);
      // The scheduled pass has summarized the day once a lookup rechecks a range, not the day.
      await waitFor(
        async () =>
          recheckedRows(await lookupPlan(t.db, tenant.appId, 'session_id', 's17', now - 60 * 60_000)) <
          10_000,
        { timeoutMs: 10_000, intervalMs: 100, what: 'the scheduled summary' },
      );
    } finally {
      await other.close();
    }
  });

  it('adds the lookup index to a current partition made without it, without blocking writes', async () => {
    const repo = t.app.get(PartitionRepository);
    const ahead = partition(Date.now() + 3 * DAY);
    await t.db.query(`DROP INDEX ${ahead}_lookup`);
    const built = await t.app.get(PartitionMaintenanceService).indexFilters(Date.now());
    expect(built).toEqual([`${ahead}_lookup`]);
    expect(await validIndexes(t.db, ahead)).toContain(`${ahead}_lookup`);
    expect(await repo.indexLookups(ahead)).toEqual([]);
  });

  it('replaces the bloom index of an earlier version with the lookup index when an instance starts', async () => {
    const today = partition(Date.now());
    await t.db.query(`DROP INDEX ${today}_lookup`);
    // What an earlier version left on the current day.
    await t.db.query(`CREATE EXTENSION IF NOT EXISTS bloom`);
    try {
      await t.db.query(`CREATE INDEX ${today}_bloom ON ${today} USING bloom (session_id, anonymous_user_id)`);
      const other = await startTestApp(env);
      try {
        expect(await other.app.get(PartitionMaintenanceService).pendingLookups).toEqual([`${today}_lookup`]);
        const indexes = await validIndexes(t.db, today);
        expect(indexes).toContain(`${today}_lookup`);
        expect(indexes).not.toContain(`${today}_bloom`);
      } finally {
        await other.close();
      }
    } finally {
      await t.db.query(`DROP EXTENSION IF EXISTS bloom CASCADE`);
    }
  });

  it('runs index upkeep and the rollup computation under different locks', async () => {
    const run = await t.app.get(PartitionRepository).withIndexLock(() => t.app.get(RollupsService).run());
    expect(run).toMatchObject({ status: 'computed' });
  });

  it('leaves index upkeep to the instance that is already doing it', async () => {
    const repo = t.app.get(PartitionRepository);
    const ahead = partition(Date.now() + 3 * DAY);
    const other = await startTestApp(env);
    try {
      await other.app.get(PartitionMaintenanceService).pendingLookups;
      await t.db.query(`DROP INDEX ${ahead}_lookup`);
      // While this instance holds the lock, the other's pass does nothing.
      const skipped = await repo.withIndexLock(() =>
        other.app.get(PartitionMaintenanceService).indexFilters(Date.now()),
      );
      expect(skipped).toEqual([]);
      expect(await validIndexes(t.db, ahead)).not.toContain(`${ahead}_lookup`);
      expect(await other.app.get(PartitionMaintenanceService).indexFilters(Date.now())).toEqual([
        `${ahead}_lookup`,
      ]);
    } finally {
      await other.close();
    }
  });
});

describe('as a role that may not create extensions', () => {
  // A database owned by a role without superuser, as on a managed server.
  const role = 'tally_no_super';
  const database = 'tally_no_super';
  let admin: Awaited<ReturnType<typeof startTestApp>>;

  beforeAll(async () => {
    admin = await startTestApp();
    await admin.db.query(`DROP DATABASE IF EXISTS ${database}`);
    await admin.db.query(`DROP ROLE IF EXISTS ${role}`);
    await admin.db.query(`CREATE ROLE ${role} LOGIN PASSWORD '${role}' NOSUPERUSER`);
    await admin.db.query(`CREATE DATABASE ${database} OWNER ${role}`);
  });

  afterAll(async () => {
    await admin.db.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.db.query(`DROP ROLE IF EXISTS ${role}`);
    await admin.close();
  });

  it('migrates, creates the current partitions with their lookup index and answers the filters', async () => {
    const url = new URL(testDatabaseUrl());
    url.username = role;
    url.password = role;
    url.pathname = `/${database}`;
    const limited = await startTestApp({ DATABASE_URL: url.toString() });
    try {
      const today = partition(Date.now());
      expect(await validIndexes(limited.db, today)).toContain(`${today}_lookup`);
      expect(await limited.app.get(PartitionMaintenanceService).summarizeLookups(1000)).toMatchObject({
        skipped: [],
      });

      const tenant = await makeTenant(limited.app);
      const ingest = await request(limited.http)
        .post('/api/ingest')
        .set(bearer(tenant.liveKey))
        .send({
          events: [{ eventName: 'App.opened', eventId: 'ns-1', sessionId: 's-1', anonymousUserId: 'u-1' }],
        });
      expect(ingest.status).toBe(200);
      const res = await request(limited.http)
        .get('/api/v1/events')
        .query({ appId: tenant.appId, sessionId: 's-1' })
        .set(bearer(tenant.apiKey));
      expect(res.status).toBe(200);
      expect(res.body.map((e: { eventId: string }) => e.eventId)).toEqual(['ns-1']);
    } finally {
      await limited.close();
    }
  });
});
