// `npm run bench -- --citus`: ingest on a Citus cluster against the same ingest on a plain
// PostgreSQL, in one run, written to the `citus` section of bench/results/latest.json.
//
// The Citus cluster is the one CITUS_COORDINATOR_URL names (a coordinator database with its workers
// added, see docs/scaling.md); the plain PostgreSQL is a private embedded cluster this run starts.
// Each side gets the built server and the same load: 100 apps, 100-event batches with unique
// eventIds, spread over the apps in turn. The figures: events/s and latency percentiles; CPU per
// stored event of each PostgreSQL cluster and of the server (with CITUS_PGDATA_DIRS, the data
// folders of the coordinator and the workers on this host, comma-separated, coordinator first);
// and the two-phase commits Citus recorded on every node during the run, by the node that started
// them (recovery paused meanwhile). With taskset present and CITUS_PGDATA_DIRS set, each worker is
// pinned to a core of its own and the coordinator and the plain cluster to all of them.
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { batchTemplate } from '../lib/events.mjs';
import { clusterCpuSeconds, clusterProcesses, cpuSecondsOf } from '../lib/processes.mjs';
import { saveResultsSection } from '../lib/report.mjs';
import { clusterDir } from '../../src/database/embedded-pg.mjs';
import { freePort, sleep, startDatabase, startServer } from '../../test/reliability/harness.mjs';

const APPS = 100;
const BATCH = 100;
const CONNECTIONS = 32;
const WARMUP_REQUESTS = 300;
const REQUESTS = 2_000;

/** 100 apps, each with a live ingest key, written as the CLI would write them. */
async function makeApps(root, url) {
  const { generateKey, hashKey } = createRequire(import.meta.url)(
    path.join(root, 'dist/src/auth/key-format.js'),
  );
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const apps = [];
    for (let i = 0; i < APPS; i++) apps.push({ id: randomUUID(), key: generateKey('live') });
    await client.query(
      `INSERT INTO apps (id, name, pii_secret, timezone, rollup_timezone)
       SELECT id, 'bench-citus-' || n, decode(md5(random()::text) || md5(random()::text), 'hex'), 'UTC', 'UTC'
         FROM unnest($1::uuid[]) WITH ORDINALITY AS t(id, n)`,
      [apps.map((a) => a.id)],
    );
    await client.query(
      `INSERT INTO keys (id, kind, mode, app_ids, scopes, key_hash, key_last4)
       SELECT gen_random_uuid(), 'ingest', 'live', ARRAY[a], '{}', h, l
         FROM unnest($1::uuid[], $2::bytea[], $3::text[]) AS t(a, h, l)`,
      [apps.map((a) => a.id), apps.map((a) => hashKey(a.key)), apps.map((a) => a.key.slice(-4))],
    );
    return apps;
  } finally {
    await client.end();
  }
}

/** `amount` ingest requests over the apps in turn, each batch with eventIds of its own. */
async function load(base, apps, amount, tag) {
  const template = batchTemplate(45, BATCH);
  let sent = 0;
  let accepted = 0;
  const started = process.hrtime.bigint();
  const result = await autocannon({
    url: `${base}/api/ingest`,
    connections: CONNECTIONS,
    amount,
    timeout: 30,
    sampleInt: 250,
    requests: [
      {
        method: 'POST',
        setupRequest: (req) => {
          const i = sent++;
          req.headers = {
            ...req.headers,
            authorization: `Bearer ${apps[i % apps.length].key}`,
            'content-type': 'application/json',
          };
          req.body = template.render(`${tag}.${i}`);
          return req;
        },
        onResponse: (status, body) => {
          if (status === 200) accepted += JSON.parse(body).accepted;
        },
      },
    ],
  });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return {
    requests: amount,
    seconds: Math.round(seconds * 100) / 100,
    accepted,
    eventsPerSec: Math.round(accepted / seconds),
    latencyMs: { p50: result.latency.p50, p99: result.latency.p99, max: result.latency.max },
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

/** Runs a measured load against `server`, with the CPU of each named cluster and of the server. */
async function measured(server, apps, clusters) {
  await load(server.base, apps, WARMUP_REQUESTS, `warm-${randomUUID()}`);
  const cpu = () => ({
    server: cpuSecondsOf(server.pid),
    ...Object.fromEntries(Object.entries(clusters).map(([name, dir]) => [name, clusterCpuSeconds(dir)])),
  });
  const before = cpu();
  const run = await load(server.base, apps, REQUESTS, `run-${randomUUID()}`);
  const after = cpu();
  const cpuMicrosPerEvent = Object.fromEntries(
    Object.keys(before).map((k) => [k, Math.round(((after[k] - before[k]) / run.accepted) * 1e6 * 10) / 10]),
  );
  return { ...run, cpuMicrosPerEvent };
}

/** Pins every process of a cluster (and those it starts later) to `cpus`. */
function pin(dataDir, cpus) {
  const cluster = clusterProcesses(dataDir);
  if (!cluster) return;
  for (const pid of [cluster.postmaster, ...cluster.children]) {
    try {
      execFileSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' });
    } catch {
      /* a backend that exited meanwhile */
    }
  }
}

async function twoPhaseCommits(client) {
  const { rows } = await client.query(
    `SELECT nodeid, result FROM run_command_on_all_nodes(
       $$SELECT coalesce(json_object_agg(g, n), '{}') FROM (
           SELECT split_part(gid, '_', 2) AS g, count(*) AS n FROM pg_dist_transaction GROUP BY 1) x$$)`,
  );
  const byInitiator = {};
  for (const r of rows) {
    for (const [group, n] of Object.entries(JSON.parse(r.result))) {
      byInitiator[`group ${group}`] = (byInitiator[`group ${group}`] ?? 0) + Number(n);
    }
  }
  return byInitiator;
}

async function setRecovery(client, value) {
  const command =
    value === null
      ? 'ALTER SYSTEM RESET citus.recover_2pc_interval'
      : `ALTER SYSTEM SET citus.recover_2pc_interval = ${value}`;
  await client.query(`SELECT run_command_on_all_nodes($1)`, [command]);
  await client.query(`SELECT run_command_on_all_nodes('SELECT pg_reload_conf()')`);
}

async function citusSide(root, url, log) {
  const dirs = (process.env.CITUS_PGDATA_DIRS ?? '').split(',').filter(Boolean);
  const clusters = Object.fromEntries(dirs.map((d, i) => [i === 0 ? 'coordinator' : `worker${i}`, d]));
  const cores = os.cpus().length;
  let pinning = null;
  if (dirs.length > 1) {
    try {
      execFileSync('taskset', ['-V'], { stdio: 'ignore' });
      pinning = { coordinator: `0-${cores - 1}` };
      dirs.slice(1).forEach((d, i) => (pinning[`worker${i + 1}`] = String(i % cores)));
      for (const [name, cpus] of Object.entries(pinning)) pin(clusters[name], cpus);
    } catch {
      pinning = null;
    }
  }
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  const server = await startServer({
    databaseUrl: url,
    port: await freePort(),
    env: { DATABASE_POOL_SIZE: '16' },
  });
  try {
    const version = (await admin.query(`SELECT citus_version() AS v`)).rows[0].v.split(' on ')[0];
    const pgVersion = (await admin.query('SHOW server_version')).rows[0].server_version;
    const workers = (await admin.query(`SELECT count(*)::int AS n FROM citus_get_active_worker_nodes()`))
      .rows[0].n;
    const apps = await makeApps(root, url);
    await setRecovery(admin, '-1');
    await admin.query(`SELECT recover_prepared_transactions()`);
    const before = await twoPhaseCommits(admin);
    log(`citus: ${version} on PostgreSQL ${pgVersion}, ${workers} workers`);
    const run = await measured(server, apps, clusters);
    const after = await twoPhaseCommits(admin);
    const twoPhase = Object.fromEntries(
      Object.keys({ ...before, ...after }).map((k) => [k, (after[k] ?? 0) - (before[k] ?? 0)]),
    );
    return {
      citus: version,
      postgres: pgVersion,
      workers,
      pinning,
      ...run,
      twoPhaseCommitsByInitiator: twoPhase,
    };
  } finally {
    await setRecovery(admin, null).catch(() => undefined);
    await admin.end();
    await server.kill('SIGTERM');
    if (pinning) for (const dir of dirs) pin(dir, `0-${cores - 1}`);
  }
}

async function plainSide(root, log) {
  const db = await startDatabase('bench-citus-plain');
  const server = await startServer({
    databaseUrl: db.url,
    port: await freePort(),
    env: { DATABASE_POOL_SIZE: '16' },
  });
  try {
    const pgVersion = (await db.pool.query('SHOW server_version')).rows[0].server_version;
    log(`plain: PostgreSQL ${pgVersion}`);
    const apps = await makeApps(root, db.url);
    const run = await measured(server, apps, { postgres: path.join(await clusterDir(db.dir), 'pg') });
    return { postgres: pgVersion, ...run };
  } finally {
    await server.kill('SIGTERM');
    await db.destroy();
  }
}

export async function citusBenchmarkMain({ root, log, git }) {
  const url = process.env.CITUS_COORDINATOR_URL;
  if (!url) {
    log(
      '--citus skipped: CITUS_COORDINATOR_URL is not set (a Citus coordinator database, see docs/scaling.md)',
    );
    return 0;
  }
  process.chdir(root);
  const plain = await plainSide(root, log);
  log(`plain: ${plain.eventsPerSec} events/s, p99 ${plain.latencyMs.p99} ms`);
  await sleep(2_000);
  const citus = await citusSide(root, url, log);
  log(`citus: ${citus.eventsPerSec} events/s, p99 ${citus.latencyMs.p99} ms`);
  const section = {
    timestamp: new Date().toISOString(),
    commit: git(['rev-parse', 'HEAD']),
    machine: { cores: os.cpus().length, loadAverage1m: Math.round(os.loadavg()[0] * 10) / 10 },
    load: { apps: APPS, batch: BATCH, connections: CONNECTIONS, requests: REQUESTS },
    plain,
    citus,
    citusVsPlain: {
      eventsPerSec: Math.round((citus.eventsPerSec / plain.eventsPerSec) * 100) / 100,
      p99: Math.round((citus.latencyMs.p99 / plain.latencyMs.p99) * 100) / 100,
    },
  };
  saveResultsSection(root, 'citus', section);
  process.stdout.write(JSON.stringify(section, null, 2) + '\n');
  return 0;
}
