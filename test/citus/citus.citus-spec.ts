// Checks that only a Citus cluster can answer: how the tables are distributed, that one app's
// reads are router queries, that multi-app ingest commits without two-phase commit, and that
// ingest stays exactly-once while a worker is stopped and restarted, and while an app's shards
// move. Run by `npm run test:citus` (test/citus/run.mjs) against CITUS_COORDINATOR_URL, never by
// the default suite (its file name is not an e2e spec).
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import path from 'node:path';
import { SchedulerRegistry } from '@nestjs/schedule';
import { Client } from 'pg';
import request from 'supertest';
import { APP_TABLES, REFERENCE_TABLES } from '@migrations/1764200000000-citus-distribution';
import { PartitionRepository } from '@app/storage/partition.repository';
import { bearer, makeApiKey, makeTenant, postIngest } from '../factories';
import { startTestApp, testDatabaseUrl, type TestApp } from '../support/test-app';

jest.setTimeout(240_000);

type Tenant = Awaited<ReturnType<typeof makeTenant>> & { worker: string };

const UNTHROTTLED = {
  INGEST_RATE_REQUESTS: '10000000',
  INGEST_RATE_EVENTS: '1000000000',
  READ_RATE_REQUESTS: '10000000',
  AUTH_FAILURE_LIMIT: '10000000',
};

/** The worker a test may stop and restart: its data folder, pg_ctl, and the OS user that owns it. */
const WORKER_PGDATA = process.env.CITUS_WORKER_PGDATA;
const PG_CTL = process.env.CITUS_PG_CTL ?? '/usr/lib/postgresql/15/bin/pg_ctl';
const PG_OS_USER = process.env.CITUS_PG_OS_USER ?? 'postgres';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let coordinator: Client;
let app: TestApp;

async function sql<T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> {
  return (await coordinator.query(text, params)).rows as T[];
}

/** `host:port` of the worker that holds `appId`'s shards. */
async function workerOf(appId: string): Promise<string> {
  const [row] = await sql<{ node: string }>(
    `SELECT nodename || ':' || nodeport AS node FROM citus_shards
      WHERE table_name = 'events'::regclass
        AND shardid = get_shard_id_for_distribution_column('events', $1::uuid)`,
    [appId],
  );
  return row.node;
}

/** At least `perWorker` apps on each of the cluster's workers. */
async function tenantsOnEveryWorker(perWorker: number): Promise<Tenant[]> {
  const workers = (
    await sql<{ node: string }>(
      `SELECT node_name || ':' || node_port AS node FROM citus_get_active_worker_nodes()`,
    )
  ).map((r) => r.node);
  const tenants: Tenant[] = [];
  const count = () => Math.min(...workers.map((w) => tenants.filter((t) => t.worker === w).length));
  while (count() < perWorker && tenants.length < perWorker * workers.length * 6) {
    const tenant = await makeTenant(app.app);
    tenants.push({ ...tenant, worker: await workerOf(tenant.appId) });
  }
  expect(count()).toBeGreaterThanOrEqual(perWorker);
  return tenants;
}

function batch(label: string, size = 100) {
  return Array.from({ length: size }, (_, i) => ({
    eventName: 'Citus.probe',
    eventId: `${label}-${i}`,
    eventTime: Date.now(),
    anonymousUserId: `u-${i % 7}`,
  }));
}

/** How many stored rows each of `eventIds` has in `appId`. */
async function storedCopies(appId: string, eventIds: string[]): Promise<Map<string, number>> {
  const rows = await sql<{ event_id: string; n: number }>(
    `SELECT event_id, count(*)::int AS n FROM events
      WHERE app_id = $1 AND event_id = ANY ($2::text[]) GROUP BY event_id`,
    [appId, eventIds],
  );
  const copies = new Map(eventIds.map((id) => [id, 0]));
  for (const r of rows) copies.set(r.event_id, r.n);
  return copies;
}

/**
 * Two-phase commits that Citus has recorded on any node (a call delegated to a worker commits
 * there) and not yet recovered: recovery is paused on every node meanwhile.
 */
async function twoPhaseCommits(): Promise<number> {
  const [row] = await sql<{ n: number }>(
    `SELECT sum(result::int)::int AS n
       FROM run_command_on_all_nodes('SELECT count(*) FROM pg_dist_transaction')`,
  );
  return row.n;
}

/** Sets (or resets, with null) the 2PC recovery interval on every node. */
async function setRecoveryInterval(value: string | null): Promise<void> {
  const command =
    value === null
      ? 'ALTER SYSTEM RESET citus.recover_2pc_interval'
      : `ALTER SYSTEM SET citus.recover_2pc_interval = ${value}`;
  await sql(`SELECT run_command_on_all_nodes($1)`, [command]);
  await sql(`SELECT run_command_on_all_nodes('SELECT pg_reload_conf()')`);
}

/** Stops every background job of the test app, so that only the test's requests write. */
function stopBackgroundJobs(test: TestApp): void {
  const registry = test.app.get(SchedulerRegistry);
  for (const name of registry.getIntervals()) registry.deleteInterval(name);
  for (const name of registry.getTimeouts()) registry.deleteTimeout(name);
  for (const name of registry.getCronJobs().keys()) registry.deleteCronJob(name);
}

beforeAll(async () => {
  coordinator = new Client({ connectionString: testDatabaseUrl() });
  await coordinator.connect();
  app = await startTestApp(UNTHROTTLED);
  const [{ interval }] = await sql<{ interval: string }>(`SHOW citus.recover_2pc_interval`);
  if (interval !== '-1') {
    await setRecoveryInterval('-1');
    restoreRecovery = true;
  }
});

let restoreRecovery = false;

afterAll(async () => {
  await app?.close();
  if (restoreRecovery) await setRecoveryInterval(null);
  await coordinator?.end();
});

describe('distribution', () => {
  it('distributes the per-app tables by app_id with events, makes reference tables, keeps the audit log local', async () => {
    const rows = await sql<{ name: string; type: string; column: string; colocation: number }>(
      `SELECT table_name::text AS name, citus_table_type AS type, distribution_column AS column,
              colocation_id AS colocation
         FROM citus_tables`,
    );
    const byName = new Map(rows.map((r) => [r.name, r]));
    const events = byName.get('events')!;
    expect(events).toMatchObject({ type: 'distributed', column: 'app_id' });
    for (const table of APP_TABLES) {
      expect({ table, ...byName.get(table) }).toMatchObject({
        table,
        type: 'distributed',
        column: 'app_id',
        colocation: events.colocation,
      });
    }
    for (const table of REFERENCE_TABLES)
      expect({ table, ...byName.get(table) }).toMatchObject({ table, type: 'reference' });
    // Every other table with rows per app too: a table added later without its rule fails here.
    const perApp = await sql<{ name: string }>(
      `SELECT c.relname AS name FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
         JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE a.attname = 'app_id' AND NOT a.attisdropped AND c.relkind IN ('r', 'p')
          AND n.nspname = current_schema() AND c.relname <> 'audit_log'`,
    );
    for (const { name } of perApp) {
      expect({ name, ...byName.get(name) }).toMatchObject({
        name,
        type: 'distributed',
        colocation: events.colocation,
      });
    }
    expect(byName.has('audit_log')).toBe(false);
    expect(byName.has('migrations')).toBe(false);
    // Partitions made at boot are distributed with their parent.
    const partitions = rows.filter((r) => /^events_p\d{8}$/.test(r.name));
    expect(partitions.length).toBeGreaterThan(0);
    for (const p of partitions)
      expect(p).toMatchObject({ type: 'distributed', colocation: events.colocation });
  });

  it("stores the insights' lists and id packs on every shard as on a single node", async () => {
    const storage = async (table: string, columns: string) =>
      (
        await sql<{ result: string }>(`SELECT result FROM run_command_on_shards($1, $2)`, [
          table,
          `SELECT string_agg(attname || '=' || attstorage::text, ',' ORDER BY attname) FROM pg_attribute
              WHERE attrelid = '%s'::regclass AND attname IN (${columns})`,
        ])
      ).map((r) => r.result);
    const lists = await storage('insight_breakdowns', `'users', 'sessions'`);
    expect(lists.length).toBeGreaterThan(0);
    expect(new Set(lists)).toEqual(new Set(['sessions=e,users=e']));
    const packs = await storage('insight_id_packs', `'entries'`);
    expect(packs.length).toBeGreaterThan(0);
    expect(new Set(packs)).toEqual(new Set(['entries=m']));
  });

  it('keeps the audit log append-only on the coordinator', async () => {
    await makeTenant(app.app);
    await expect(sql(`DELETE FROM audit_log WHERE id = (SELECT max(id) FROM audit_log)`)).rejects.toThrow(
      'audit_log is append-only: DELETE refused',
    );
  });
});

describe('ingest commits on one worker', () => {
  it('counts a two-phase commit when one transaction writes on two workers (the probe works)', async () => {
    const tenants = await tenantsOnEveryWorker(1);
    const a = tenants.find((t) => t.worker === tenants[0].worker)!;
    const b = tenants.find((t) => t.worker !== a.worker)!;
    await sql(`SELECT recover_prepared_transactions()`);
    const before = await twoPhaseCommits();
    await sql(`BEGIN`);
    await sql(`INSERT INTO rollup_dirty (app_id, day, timezone) VALUES ($1, current_date, 'UTC')`, [a.appId]);
    await sql(`INSERT INTO rollup_dirty (app_id, day, timezone) VALUES ($1, current_date, 'UTC')`, [b.appId]);
    await sql(`COMMIT`);
    expect(await twoPhaseCommits()).toBeGreaterThan(before);
  });

  it('multi-app ingest under load makes no two-phase commit, and stores every event once', async () => {
    const tenants = await tenantsOnEveryWorker(6);
    // Only the requests below write: no key last-used flush, no upkeep.
    stopBackgroundJobs(app);
    await sql(`SELECT recover_prepared_transactions()`);
    const before = await twoPhaseCommits();
    const sent = new Map<string, string[]>(tenants.map((t) => [t.appId, []]));
    for (let round = 0; round < 5; round++) {
      const answers = await Promise.all(
        tenants.flatMap((t) =>
          [0, 1].map((k) => {
            const events = batch(`2pc-${round}-${k}-${randomUUID()}`);
            sent.get(t.appId)!.push(...events.map((e) => e.eventId));
            return postIngest(app.http, t.liveKey, { events });
          }),
        ),
      );
      for (const res of answers)
        expect({ status: res.status, body: res.body as unknown }).toMatchObject({
          status: 200,
          body: { accepted: 100 },
        });
    }
    expect(await twoPhaseCommits()).toBe(before);
    for (const t of tenants) {
      const copies = await storedCopies(t.appId, sent.get(t.appId)!);
      expect([...copies.values()].every((n) => n === 1)).toBe(true);
    }
  });
});

describe('partition upkeep', () => {
  it("sizes today's partition over its shards and summarizes its BRIN lookup index on the shards", async () => {
    const [tenant] = await tenantsOnEveryWorker(1);
    const res = await postIngest(app.http, tenant.liveKey, { events: batch(`upkeep-${randomUUID()}`) });
    expect(res.status).toBe(200);
    const repo = app.app.get(PartitionRepository);
    const today = `events_p${new Date().toISOString().slice(0, 10).replace(/-/g, '')}_lookup`;
    const index = (await repo.lookupIndexes()).find((i) => i.index === today);
    expect(index).toBeDefined();
    // The coordinator's partition is an empty shell: these blocks are the shards'.
    expect(index!.blocks).toBeGreaterThan(0);
    const summarized = await repo.summarizeRanges(index!.index, 0, index!.blocks, 1_000);
    expect(summarized).toEqual(expect.any(Number));
    const [shards] = await sql<{ failed: number }>(
      `SELECT count(*) FILTER (WHERE NOT success)::int AS failed
         FROM run_command_on_shards($1, $$SELECT count(*) FROM pg_index WHERE indrelid = '%s'::regclass$$)`,
      [today.replace(/_lookup$/, '')],
    );
    expect(shards.failed).toBe(0);
  });
});

describe('reads of one app', () => {
  let routed: TestApp;
  let tenant: Tenant;
  let exportKey: string;

  beforeAll(async () => {
    // A read pool on which Citus refuses any query that needs more than one shard.
    const url = new URL(testDatabaseUrl());
    url.searchParams.set('options', '-c citus.multi_task_query_log_level=error');
    routed = await startTestApp({ ...UNTHROTTLED, DATABASE_READ_URL: url.toString() });
    [tenant] = await tenantsOnEveryWorker(1);
    exportKey = (await makeApiKey(app.app, [tenant.appId], ['events:export'])).key;
    const res = await postIngest(routed.http, tenant.liveKey, { events: batch(`reads-${randomUUID()}`, 20) });
    expect(res.status).toBe(200);
  });

  afterAll(async () => {
    await routed?.close();
  });

  it('the read pool refuses a query over several shards (the guard works)', async () => {
    const url = new URL(testDatabaseUrl());
    url.searchParams.set('options', '-c citus.multi_task_query_log_level=error');
    const guarded = new Client({ connectionString: url.toString() });
    await guarded.connect();
    try {
      await expect(guarded.query(`SELECT count(*) FROM events`)).rejects.toThrow(/multi-task/i);
    } finally {
      await guarded.end();
    }
  });

  it('events, rollups and the export answer from one shard', async () => {
    const http: Server = routed.http;
    const events = await request(http)
      .get(`/api/v1/events?appId=${tenant.appId}&limit=10`)
      .set(bearer(tenant.apiKey));
    expect(events.status).toBe(200);
    expect(events.body).toHaveLength(10);
    const filtered = await request(http)
      .get(`/api/v1/events?appId=${tenant.appId}&anonymousUserId=u-3`)
      .set(bearer(tenant.apiKey));
    expect(filtered.status).toBe(200);
    const users = (filtered.body as { anonymousUserId: string }[]).map((e) => e.anonymousUserId);
    expect(users.length).toBeGreaterThan(0);
    expect(new Set(users)).toEqual(new Set(['u-3']));
    const rollups = await request(http)
      .get(`/api/v1/rollups?appId=${tenant.appId}&range=7d`)
      .set(bearer(tenant.apiKey));
    expect(rollups.status).toBe(200);
    const from = new Date(Date.now() - 3_600_000).toISOString();
    const exported = await request(http)
      .get(`/api/v1/export?appId=${tenant.appId}&from=${from}`)
      .set(bearer(exportKey));
    expect(exported.status).toBe(200);
  });

  it('plans the events page of one app as a router query (one task)', async () => {
    const rows = await sql<{ 'QUERY PLAN': string }>(
      `EXPLAIN SELECT id, received_at FROM events WHERE app_id = $1
        ORDER BY received_at DESC, id DESC LIMIT 100`,
      [tenant.appId],
    );
    const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
    expect(plan).toMatch(/Task Count: 1\b/);
  });
});

/** Runs pg_ctl on the worker a test stops, as the OS user that owns its cluster. */
function pgCtl(args: string[]): void {
  const command = [PG_CTL, '-D', WORKER_PGDATA!, ...args];
  const asOwner = process.getuid?.() === 0 ? ['runuser', '-u', PG_OS_USER, '--', ...command] : command;
  execFileSync(asOwner[0], asOwner.slice(1), { stdio: 'ignore', timeout: 60_000 });
}

/** `host:port` of the worker whose data folder is CITUS_WORKER_PGDATA (from its postmaster.pid). */
function stoppableWorkerPort(): number {
  const lines = readFileSync(path.join(WORKER_PGDATA!, 'postmaster.pid'), 'utf8').split('\n');
  return Number(lines[3]);
}

interface Load {
  sent: Map<string, string[]>;
  answers: { appId: string; status: number; retryAfter: string | undefined; at: number }[];
  stop(): Promise<void>;
}

/**
 * Keeps each tenant ingesting 50-event batches until stopped, like an SDK: a batch that gets
 * anything but 200 is sent again, whole, after a short pause.
 */
function startLoad(tenants: Tenant[], label: string): Load {
  const sent = new Map<string, string[]>(tenants.map((t) => [t.appId, []]));
  const answers: Load['answers'] = [];
  let running = true;
  // Never longer than this, whatever happens to the test.
  const deadline = Date.now() + 120_000;
  const loops = tenants.map(async (t) => {
    for (let n = 0; running && Date.now() < deadline; n++) {
      const events = batch(`${label}-${n}-${randomUUID()}`, 50);
      while (Date.now() < deadline) {
        const res = await postIngest(app.http, t.liveKey, { events })
          .timeout(30_000)
          .catch(() => null);
        const status = res?.status ?? 0;
        answers.push({ appId: t.appId, status, retryAfter: res?.headers['retry-after'], at: Date.now() });
        if (status === 200) break;
        await sleep(200);
      }
      sent.get(t.appId)!.push(...events.map((e) => e.eventId));
    }
  });
  return {
    sent,
    answers,
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

async function expectExactlyOnce(load: Load): Promise<void> {
  for (const [appId, ids] of load.sent) {
    expect(ids.length).toBeGreaterThan(0);
    const copies = await storedCopies(appId, ids);
    const wrong = [...copies.entries()].filter(([, n]) => n !== 1);
    expect({ appId, wrong: wrong.slice(0, 5) }).toEqual({ appId, wrong: [] });
  }
}

describe('a shard move during ingest', () => {
  it("moves an app's shard group to the other worker while it ingests, and stores every event exactly once", async () => {
    const tenants = await tenantsOnEveryWorker(1);
    const moving = tenants[0];
    const [shard] = await sql<{ shardid: string; nodename: string; nodeport: number }>(
      `SELECT shardid::text, nodename, nodeport FROM citus_shards
        WHERE table_name = 'events'::regclass
          AND shardid = get_shard_id_for_distribution_column('events', $1::uuid)`,
      [moving.appId],
    );
    const [target] = await sql<{ nodename: string; nodeport: number }>(
      `SELECT node_name AS nodename, node_port AS nodeport FROM citus_get_active_worker_nodes()
        WHERE node_name || ':' || node_port <> $1 LIMIT 1`,
      [moving.worker],
    );
    const move = (from: { nodename: string; nodeport: number }, to: { nodename: string; nodeport: number }) =>
      sql(
        `SELECT citus_move_shard_placement($1::bigint, $2, $3, $4, $5, shard_transfer_mode => 'block_writes')`,
        [shard.shardid, from.nodename, from.nodeport, to.nodename, to.nodeport],
      );
    const load = startLoad(tenants, 'move');
    try {
      await sleep(1_000);
      await move(shard, target);
      await sleep(1_000);
    } finally {
      await load.stop();
    }
    expect(await workerOf(moving.appId)).toBe(`${target.nodename}:${target.nodeport}`);
    await expectExactlyOnce(load);
    expect(load.answers.filter((a) => a.status !== 200 && a.status !== 503)).toEqual([]);
    // Back where it was, so that the cluster is left as it was found. The old placement is dropped
    // once no transaction uses it any more; until then Citus refuses another move of the group.
    for (let attempt = 1; ; attempt++) {
      await sql(`CALL citus_cleanup_orphaned_resources()`);
      try {
        await move(target, shard);
        break;
      } catch (err) {
        if (attempt === 10 || !/orphaned/.test(String(err))) throw err;
        await sleep(1_000);
      }
    }
  });
});

const withWorker = WORKER_PGDATA ? describe : describe.skip;

withWorker('a worker stopped with -m immediate under load', () => {
  it('answers 503 with Retry-After for its apps only, and stores every event exactly once after it restarts', async () => {
    const port = stoppableWorkerPort();
    const tenants = await tenantsOnEveryWorker(2);
    const down = tenants.filter((t) => t.worker.endsWith(`:${port}`));
    const up = tenants.filter((t) => !t.worker.endsWith(`:${port}`));
    const load = startLoad(tenants, 'outage');
    let stoppedAt = 0;
    let restartedAt = 0;
    try {
      await sleep(1_500);
      stoppedAt = Date.now();
      pgCtl(['-m', 'immediate', 'stop']);
      await sleep(5_000);
      restartedAt = Date.now();
    } finally {
      pgCtl(['-w', '-l', `${WORKER_PGDATA}.log`, 'start']);
      await sleep(3_000);
      await load.stop();
    }

    // Settle: answers given while the worker was surely down (a second after the stop).
    const during = load.answers.filter((a) => a.at > stoppedAt + 1_000 && a.at < restartedAt);
    const downIds = new Set(down.map((t) => t.appId));
    const ofDown = during.filter((a) => downIds.has(a.appId));
    const ofUp = during.filter((a) => !downIds.has(a.appId));
    expect(ofDown.length).toBeGreaterThan(0);
    for (const a of ofDown)
      expect({ status: a.status, retryAfter: a.retryAfter !== undefined }).toEqual({
        status: 503,
        retryAfter: true,
      });
    expect(ofUp.length).toBeGreaterThan(0);
    expect(ofUp.filter((a) => a.status !== 200)).toEqual([]);
    await expectExactlyOnce(load);
    expect(up.length).toBeGreaterThan(0);
  });
});
