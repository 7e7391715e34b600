import { Client } from 'pg';
import request from 'supertest';
import type { DataSource } from 'typeorm';
import { DAY_MS as DAY, utcDateString as dayOf } from '@app/common/time';
import { PartitionMaintenanceService } from '@app/storage/partition-maintenance.service';
import { PartitionRepository } from '@app/storage/partition.repository';
import { RollupsService } from '@app/rollups/rollups.service';
import { bearer, makeTenant } from './factories';
import { startTestApp, testDatabaseUrl, useTestApp } from './support/test-app';

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

/** The test database's URL with another database name. */
function otherDatabase(name: string): string {
  const url = new URL(testDatabaseUrl());
  url.pathname = `/${name}`;
  return url.toString();
}

describe('user and session lookups on the days ingest writes', () => {
  // A database of its own: the planner weighs the bloom index by the size of today's whole
  // partition, which the rows of the other suites would otherwise grow and tip towards the app's
  // B-tree, depending on the order the suites ran in.
  const database = 'tally_lookups';
  beforeAll(async () => {
    const admin = new Client({ connectionString: testDatabaseUrl() });
    await admin.connect();
    try {
      await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      await admin.query(`CREATE DATABASE ${database}`);
    } finally {
      await admin.end();
    }
  });
  const env = {
    DATABASE_URL: otherDatabase(database),
    INGEST_MAX_EVENT_AGE_DAYS: '7',
    PARTITIONS_AHEAD_DAYS: '3',
  };
  const t = useTestApp(env);
  beforeAll(() => t.app.get(PartitionMaintenanceService).pendingLookups);

  it('creates today and the days ahead with a bloom index, and ended days without one', async () => {
    const now = Date.now();
    for (let n = 0; n <= 3; n++) {
      const name = partition(now + n * DAY);
      expect(await validIndexes(t.db, name)).toContain(`${name}_bloom`);
    }
    const yesterday = partition(now - DAY);
    await t.app.get(PartitionMaintenanceService).run(now);
    const indexes = await validIndexes(t.db, yesterday);
    expect(indexes).toEqual(expect.arrayContaining([`${yesterday}_user`, `${yesterday}_session`]));
    expect(indexes).not.toContain(`${yesterday}_bloom`);
  });

  it('answers sessionId and anonymousUserId reads of today through the bloom index', async () => {
    const tenant = await makeTenant(t.app);
    const now = Date.now();
    // 40,000 events today over 4,000 sessions and 1,000 users: enough rows that a scan of the
    // day costs more than the index.
    await t.db.query(
      `INSERT INTO events (app_id, ts, received_at, event_name, event_id, anonymous_user_id, session_id,
                           is_test_mode)
       SELECT $1::uuid, t, t, 'Screen.viewed', 'lookup.' || g, 'u' || (g % 1000), 's' || (g % 4000), false
         FROM generate_series(1, 40000) AS g, LATERAL (SELECT $2::timestamptz - g * interval '1 ms' AS t) x`,
      [tenant.appId, new Date(now).toISOString()],
    );
    await t.db.query(`ANALYZE ${partition(now)}`);

    const res = await request(t.http)
      .get('/api/v1/events')
      .query({ appId: tenant.appId, sessionId: 's17', limit: 1000 })
      .set(bearer(tenant.apiKey));
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(10);
    expect(new Set(res.body.map((e: { sessionId: string }) => e.sessionId))).toEqual(new Set(['s17']));
    const users = await request(t.http)
      .get('/api/v1/events')
      .query({ appId: tenant.appId, anonymousUserId: 'u17', limit: 1000 })
      .set(bearer(tenant.apiKey));
    expect(users.status).toBe(200);
    expect(users.body).toHaveLength(40);

    // The plan of the events list's filtered query (src/events/event.repository.ts) for today.
    for (const [column, value] of [
      ['session_id', 's17'],
      ['anonymous_user_id', 'u17'],
    ]) {
      const plan = (await t.db.query(
        `EXPLAIN SELECT id FROM events
          WHERE app_id = $1 AND ${column} = $2 AND is_test_mode = false AND ts >= $3
          ORDER BY received_at DESC, id DESC LIMIT 1000`,
        [tenant.appId, value, new Date(now - 60 * 60_000).toISOString()],
      )) as { 'QUERY PLAN': string }[];
      expect(plan.map((r) => r['QUERY PLAN']).join('\n')).toContain(
        `Bitmap Index Scan on ${partition(now)}_bloom`,
      );
    }
  });

  it('adds the bloom index to a current partition made without it, without blocking writes', async () => {
    const repo = t.app.get(PartitionRepository);
    const ahead = partition(Date.now() + 3 * DAY);
    await t.db.query(`DROP INDEX ${ahead}_bloom`);
    const built = await t.app.get(PartitionMaintenanceService).indexFilters(Date.now());
    expect(built).toEqual([`${ahead}_bloom`]);
    expect(await validIndexes(t.db, ahead)).toContain(`${ahead}_bloom`);
    expect(await repo.indexLookups(ahead)).toEqual([]);
  });

  it('adds a missing bloom index to the current day when an instance starts', async () => {
    const today = partition(Date.now());
    await t.db.query(`DROP INDEX ${today}_bloom`);
    const other = await startTestApp(env);
    try {
      expect(await other.app.get(PartitionMaintenanceService).pendingLookups).toEqual([`${today}_bloom`]);
      expect(await validIndexes(t.db, today)).toContain(`${today}_bloom`);
    } finally {
      await other.close();
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
      await t.db.query(`DROP INDEX ${ahead}_bloom`);
      // While this instance holds the lock, the other's pass does nothing.
      const skipped = await repo.withIndexLock(() =>
        other.app.get(PartitionMaintenanceService).indexFilters(Date.now()),
      );
      expect(skipped).toEqual([]);
      expect(await validIndexes(t.db, ahead)).not.toContain(`${ahead}_bloom`);
      expect(await other.app.get(PartitionMaintenanceService).indexFilters(Date.now())).toEqual([
        `${ahead}_bloom`,
      ]);
    } finally {
      await other.close();
    }
  });
});

describe('without the bloom extension', () => {
  // A database owned by a role that may not create extensions, as on a managed server where
  // the service does not run as a superuser.
  const role = 'tally_no_bloom';
  const database = 'tally_no_bloom';
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

  it('migrates, creates partitions without it and still answers the filters', async () => {
    const url = new URL(testDatabaseUrl());
    url.username = role;
    url.password = role;
    url.pathname = `/${database}`;
    const limited = await startTestApp({ DATABASE_URL: url.toString() });
    try {
      const extensions = (await limited.db.query(`SELECT extname FROM pg_extension`)) as {
        extname: string;
      }[];
      expect(extensions.map((e) => e.extname)).not.toContain('bloom');
      const today = partition(Date.now());
      expect(await validIndexes(limited.db, today)).not.toContain(`${today}_bloom`);
      expect(await limited.app.get(PartitionMaintenanceService).indexFilters(Date.now())).toEqual(
        expect.not.arrayContaining([`${today}_bloom`]),
      );

      const tenant = await makeTenant(limited.app);
      const ingest = await request(limited.http)
        .post('/api/ingest')
        .set(bearer(tenant.liveKey))
        .send({
          events: [{ eventName: 'App.opened', eventId: 'nb-1', sessionId: 's-1', anonymousUserId: 'u-1' }],
        });
      expect(ingest.status).toBe(200);
      const res = await request(limited.http)
        .get('/api/v1/events')
        .query({ appId: tenant.appId, sessionId: 's-1' })
        .set(bearer(tenant.apiKey));
      expect(res.status).toBe(200);
      expect(res.body.map((e: { eventId: string }) => e.eventId)).toEqual(['nb-1']);
    } finally {
      await limited.close();
    }
  });
});
