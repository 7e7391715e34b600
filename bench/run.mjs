/* global fetch */
// The Tally benchmark: `npm run bench` (full run, writes bench/results/latest.json) or
// `npm run bench -- --quick` (a small correctness run for CI, writes bench/results/quick.json).
//
// One process tree: an embedded PostgreSQL of its own, the built server as a child process, a
// bare node:http server as the HTTP ceiling, and autocannon in this process. All load goes to
// 127.0.0.1, every loop is bounded by a request count or a deadline.
//
// Flags: --quick, --skip-reads (no reads dataset, no rollup figures), --keep-pg (leave the cached
// cluster running afterwards, for inspection), --profile (write a V8 CPU profile of the ingest
// server to bench/.cache/profiles/ and list its hottest functions).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ensure, makeTemporaryDir, stop as stopCluster } from '../src/database/embedded-pg.mjs';
import { batchTemplate, rng } from './lib/events.mjs';
import { runLoad, percentiles } from './lib/load.mjs';
import {
  cli,
  clusterCpuSeconds,
  cpuSecondsOf,
  freePort,
  startBareServer,
  startServer,
} from './lib/processes.mjs';
import {
  commitProbe,
  connect,
  countDedup,
  countEvents,
  databaseExists,
  dbCeiling,
  generateEvents,
  insertApps,
  recreateDatabase,
  withDatabase,
} from './lib/db.mjs';
import { loadWritePath } from './lib/write-path.mjs';
import { benchDtoValidator, benchValidator, loadDtoValidator, loadValidator } from './lib/validation.mjs';
import { evaluateTargets, hottestFunctions, renderSummary } from './lib/report.mjs';
import { openServices } from './lib/services.mjs';
import { robustnessMode } from './scenarios/robustness.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const BENCH = path.join(ROOT, 'bench');
const CACHE = path.join(BENCH, '.cache');
const READS_DATASET_VERSION = 2;

const { values: flags } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    'skip-reads': { type: 'boolean', default: false },
    'keep-pg': { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    robustness: { type: 'boolean', default: false },
  },
});
const QUICK = flags.quick;

// Sizes of everything. The full run targets about 10 s per load run; the quick run only has to
// prove that the harness and the correctness checks work.
const PLAN = QUICK
  ? {
      loadSeconds: 1.5,
      maxLoadSeconds: 20,
      warmupRequests: 40,
      dbCeilingSeconds: 1,
      validationEvents: 20_000,
      reads: { apps: 5, total: 30_000, bigCount: 20_000, days: 30, requests: 20 },
      incrementalEvents: 1_000,
    }
  : {
      loadSeconds: 10,
      maxLoadSeconds: 45,
      warmupRequests: 400,
      dbCeilingSeconds: 10,
      validationEvents: 400_000,
      reads: { apps: 50, total: 5_000_000, bigCount: 2_000_000, days: 30, requests: 200 },
      incrementalEvents: 10_000,
    };

const started = Date.now();
const log = (msg) =>
  process.stderr.write(`[bench ${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s] ${msg}\n`);
const correctness = [];
function check(name, pass, detail) {
  correctness.push({ check: name, pass: Boolean(pass), detail });
  if (!pass) log(`CHECK FAILED: ${name}: ${detail}`);
}

function git(args) {
  try {
    return execFileSync('git', args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'ignore'] })
      .toString()
      .trim();
  } catch {
    return '';
  }
}

/**
 * Runs the benchmark against a private copy of dist/, so that a rebuild in the working tree while
 * the benchmark runs cannot swap code under the server or the CLI halfway through.
 */
async function snapshotDist() {
  const source = path.join(ROOT, 'dist');
  const target = path.join(CACHE, `dist-${process.pid}`);
  const needed = [
    'src/main.js',
    'src/cli/main.js',
    'src/cli/cli.module.js',
    'src/config/config.js',
    'src/database/prepare.js',
    'src/database/embedded-pg.mjs',
    'src/rollups/rollups.service.js',
  ];
  // A build that someone else started may be half-written; wait for a complete one.
  for (let attempt = 0; ; attempt++) {
    fs.rmSync(target, { recursive: true, force: true });
    try {
      fs.cpSync(source, target, { recursive: true });
    } catch {
      /* dist changed while it was copied */
    }
    const missing = needed.filter((f) => !fs.existsSync(path.join(target, f)));
    if (!missing.length) return target;
    if (attempt === 20) throw new Error(`dist/ is incomplete (${missing.join(', ')}): run \`npm run build\``);
    await new Promise((r) => setTimeout(r, 3000));
  }
}

async function startCluster() {
  if (QUICK) {
    const dir = await makeTemporaryDir('bench');
    const { url } = await ensure(dir, await freePort());
    return { dir, url, temporary: true };
  }
  const dir = path.join(CACHE, 'pg');
  const { url } = await ensure(dir, await freePort());
  return { dir, url, temporary: false };
}

/** An app and its ingest key through the admin CLI, the way an operator makes them. */
async function makeTenant(dist, url, name) {
  const app = await cli(dist, url, ['apps', 'create', '--name', name]);
  const ingest = await cli(dist, url, ['keys', 'create-ingest', '--app', app.id]);
  return { appId: app.id, ingestKey: ingest.key };
}

// ---------------------------------------------------------------------------------------------
// Ingest

function ingestHeaders(key, gzip = false) {
  return {
    authorization: `Bearer ${key}`,
    'content-type': 'application/json',
    ...(gzip ? { 'content-encoding': 'gzip' } : {}),
  };
}

/** Runs one ingest load and checks it against the database: rows Δ == accepted == sent. */
async function ingestRun(
  name,
  { server, db, tenant, connections, amount, batch, gzip = false, seed, pgDir },
) {
  const templates = Array.from({ length: 32 }, (_, i) => batchTemplate(seed * 100 + i, batch));
  const runId = `${name}-${Date.now().toString(36)}`;
  const render = (i) => templates[i % templates.length].render(`${runId}.${i.toString(36)}`);
  let body = render;
  let bodyBytes = render(0).length;
  if (gzip) {
    // Compressed ahead of time, so that compression does not take load-generator CPU.
    const pool = Array.from({ length: amount }, (_, i) => zlib.gzipSync(render(i)));
    bodyBytes = pool.reduce((n, b) => n + b.length, 0) / pool.length;
    body = (i) => pool[i];
  }
  const before = await countEvents(db, tenant.appId);
  const dedupBefore = await countDedup(db, tenant.appId);
  const cpu = () => {
    const own = process.cpuUsage();
    return {
      server: cpuSecondsOf(server.pid),
      postgres: clusterCpuSeconds(pgDir),
      loadGenerator: (own.user + own.system) / 1e6,
    };
  };
  const cpuBefore = cpu();
  const result = await runLoad({
    url: `${server.baseUrl}/api/ingest`,
    method: 'POST',
    headers: ingestHeaders(tenant.ingestKey, gzip),
    body,
    connections,
    amount,
    count: true,
    maxSeconds: PLAN.maxLoadSeconds,
  });
  const cpuAfter = cpu();
  const after = await countEvents(db, tenant.appId);
  const dedupAfter = await countDedup(db, tenant.appId);
  const sent = result.requests * batch;
  result.batch = batch;
  result.gzip = gzip;
  result.bodyBytes = Math.round(bodyBytes);
  result.rows = { before, after, delta: after - before, dedupDelta: dedupAfter - dedupBefore };
  const t = result.totals;
  // Where the 2 cores went: CPU microseconds per accepted event, by process.
  const perEvent = (seconds) => Math.round((seconds / Math.max(1, t.accepted)) * 1e7) / 10;
  const spent = (k) => cpuAfter[k] - cpuBefore[k];
  result.cpuUsPerEvent = {
    server: perEvent(spent('server')),
    postgres: perEvent(spent('postgres')),
    loadGenerator: perEvent(spent('loadGenerator')),
    total: perEvent(spent('server') + spent('postgres') + spent('loadGenerator')),
  };
  check(
    `${name}: no errors`,
    result.errors + result.timeouts + result.non2xx + result.badBodies === 0,
    `errors ${result.errors}, timeouts ${result.timeouts}, non-2xx ${result.non2xx} ${JSON.stringify(result.statusCodes)}, unreadable bodies ${result.badBodies}`,
  );
  check(
    `${name}: ran to completion`,
    !result.stoppedEarly && result.requests === amount,
    `${result.requests} of ${amount} requests answered${result.stoppedEarly ? ', stopped by the safety deadline' : ''}`,
  );
  check(
    `${name}: every event accepted`,
    t.accepted === sent && t.received === sent,
    `sent ${sent}, received ${t.received}, accepted ${t.accepted}, duplicates ${t.duplicates}, rejected ${t.rejected}`,
  );
  check(
    `${name}: rows stored == accepted`,
    result.rows.delta === t.accepted,
    `events rows Δ ${result.rows.delta}, accepted ${t.accepted}`,
  );
  check(
    `${name}: dedup records == accepted`,
    result.rows.dedupDelta === t.accepted,
    `event_dedup rows Δ ${result.rows.dedupDelta}, accepted ${t.accepted}`,
  );
  const c = result.cpuUsPerEvent;
  log(
    `${name}: ${Math.round(result.eventsPerSec ?? 0)} events/s, p50 ${result.latencyMs.p50} ms, p99 ${result.latencyMs.p99} ms; ` +
      `CPU µs/event: server ${c.server}, postgres ${c.postgres}, load generator ${c.loadGenerator}; ` +
      `server peak RSS so far ${Math.round(server.memory().sampledPeak / 1048576)} MB`,
  );
  return result;
}

/** A request count that takes about PLAN.loadSeconds at the rate seen so far. */
function amountFor(requestsPerSec, connections) {
  const n = Math.round(requestsPerSec * PLAN.loadSeconds);
  return Math.max(connections * 3, Math.min(n, 20_000));
}

async function ingestPhase(dist, cluster, results) {
  const url = withDatabase(cluster.url, 'bench_ingest');
  await recreateDatabase(cluster.url, 'bench_ingest');
  const profileDir = path.join(CACHE, 'profiles');
  const server = await startServer({
    dist,
    databaseUrl: url,
    nodeArgs: flags.profile ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [],
  });
  log(`server pid ${server.pid} on ${server.baseUrl} (bench_ingest)`);
  const db = await connect(url);
  try {
    results.machine.commitLatencyMs = percentiles(await commitProbe(url, QUICK ? 20 : 200));
    log(`commit latency: p50 ${results.machine.commitLatencyMs.p50} ms`);
    const tenant = await makeTenant(dist, url, 'bench-ingest');
    const ingest = {};
    const warm = await ingestRun('warmup', {
      server,
      db,
      tenant,
      pgDir: path.join(cluster.dir, 'pg'),
      connections: 16,
      amount: PLAN.warmupRequests,
      batch: 100,
      seed: 1,
    });
    ingest.eventBytes = Math.round(warm.bodyBytes / 100);
    ingest.batch100_c16 = await ingestRun('batch100_c16', {
      server,
      db,
      tenant,
      pgDir: path.join(cluster.dir, 'pg'),
      connections: 16,
      amount: amountFor(warm.requestsPerSec, 16),
      batch: 100,
      seed: 2,
    });
    ingest.batch100_c64 = await ingestRun('batch100_c64', {
      server,
      db,
      tenant,
      pgDir: path.join(cluster.dir, 'pg'),
      connections: 64,
      amount: amountFor(ingest.batch100_c16.requestsPerSec, 64),
      batch: 100,
      seed: 3,
    });
    const eventsRate = ingest.batch100_c64.eventsPerSec || ingest.batch100_c16.eventsPerSec || 1000;
    ingest.batch1000_c16 = await ingestRun('batch1000_c16', {
      server,
      db,
      tenant,
      pgDir: path.join(cluster.dir, 'pg'),
      connections: 16,
      amount: amountFor(eventsRate / 1000, 16),
      batch: 1000,
      seed: 4,
    });
    ingest.gzip100_c64 = await ingestRun('gzip100_c64', {
      server,
      db,
      tenant,
      pgDir: path.join(cluster.dir, 'pg'),
      connections: 64,
      amount: Math.min(amountFor(ingest.batch100_c64.requestsPerSec, 64), 6000),
      batch: 100,
      gzip: true,
      seed: 5,
    });
    const runs = [warm, ingest.batch100_c16, ingest.batch100_c64, ingest.batch1000_c16, ingest.gzip100_c64];
    ingest.totalErrors = runs.reduce((n, r) => n + r.errors + r.timeouts + r.non2xx, 0);
    const mem = server.memory();
    results.memory = {
      peakRssMb: Math.round(Math.max(mem.hwm, mem.sampledPeak) / 1048576),
      vmHwmMb: Math.round(mem.hwm / 1048576),
      sampledPeakRssMb: Math.round(mem.sampledPeak / 1048576),
      rssAfterIngestMb: Math.round(mem.rss / 1048576),
    };
    results.ingest = ingest;

    // The database ceiling, on the same schema and the same (now well-filled) tables.
    const write = loadWritePath(dist);
    if (!write) {
      check(
        'db ceiling: ingest repository found in dist/src/ingest',
        false,
        'no IngestRepository in the build',
      );
    } else {
      // Group commit makes the service write statements of up to INGEST_WRITE_MAX_EVENTS (1,000)
      // rows under load, so the ceiling is measured at both statement sizes and the higher one
      // counts: the ratio never flatters the service.
      const [ceilingApp] = await insertApps(db, 1, 'bench-db-ceiling');
      const runs = [];
      for (const batchSize of [100, 1000]) {
        const before = await countEvents(db, ceilingApp);
        const ceiling = await dbCeiling({
          url,
          appId: ceilingApp,
          connections: 4,
          seconds: PLAN.dbCeilingSeconds / 2,
          batchSize,
          write,
        });
        const delta = (await countEvents(db, ceilingApp)) - before;
        check(
          `db ceiling ${batchSize}-row statements: rows stored == rows written`,
          delta === ceiling.rows,
          `rows Δ ${delta}, written ${ceiling.rows}`,
        );
        const { latencies, ...rest } = ceiling;
        runs.push({ ...rest, batchLatencyMs: percentiles(latencies) });
        log(`db ceiling, ${batchSize}-row statements: ${Math.round(ceiling.rowsPerSec)} rows/s`);
      }
      const best = runs.reduce((a, b) => (b.rowsPerSec > a.rowsPerSec ? b : a));
      results.dbCeiling = {
        ...best,
        method: 'IngestRepository.insertBatches (one INSERT … SELECT FROM unnest(…) statement per batch)',
        runs,
      };
    }
  } finally {
    await db.end();
    const code = await server.stop();
    check('ingest server exits cleanly on SIGTERM', code === 0, `exit code ${code}`);
    if (flags.profile) results.ingestProfile = hottestFunctions(profileDir, server.pid);
  }
}

async function httpCeilingPhase(results) {
  const server = await startBareServer(path.join(BENCH, 'http-ceiling.mjs'));
  try {
    const templates = Array.from({ length: 32 }, (_, i) => batchTemplate(200 + i, 100));
    // The bare server does not deduplicate, so fixed bodies are fair, and cheapest for the client.
    const body = templates.map((t, i) => Buffer.from(t.render(`h${i}`)));
    const out = {};
    const warm = await runLoad({
      url: `${server.baseUrl}/api/ingest`,
      method: 'POST',
      headers: ingestHeaders('x'),
      body,
      connections: 16,
      amount: PLAN.warmupRequests * 2,
      count: true,
    });
    for (const connections of [16, 64]) {
      const r = await runLoad({
        url: `${server.baseUrl}/api/ingest`,
        method: 'POST',
        headers: ingestHeaders('x'),
        body,
        connections,
        amount: Math.max(
          connections * 3,
          Math.min(Math.round(warm.requestsPerSec * PLAN.loadSeconds * 0.6), 40_000),
        ),
        count: true,
        maxSeconds: PLAN.maxLoadSeconds,
      });
      check(
        `http ceiling c${connections}: no errors`,
        r.errors + r.timeouts + r.non2xx === 0 && !r.stoppedEarly,
        `errors ${r.errors}, timeouts ${r.timeouts}, non-2xx ${r.non2xx}`,
      );
      out[`c${connections}`] = r;
      log(`http ceiling c${connections}: ${Math.round(r.eventsPerSec)} events/s`);
    }
    results.httpCeiling = out;
  } finally {
    await server.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// Reads and rollups

/** The cached reads dataset when it matches this run's plan and day, else null. */
async function cachedReadsDataset(cluster, url) {
  if (!(await databaseExists(cluster.url, 'bench_reads'))) return null;
  const want = { version: READS_DATASET_VERSION, ...PLAN.reads, day: new Date().toISOString().slice(0, 10) };
  const db = await connect(url);
  try {
    const { rows } = await db
      .query(`SELECT value FROM bench_meta WHERE name = 'reads' AND to_regclass('bench_meta') IS NOT NULL`)
      .catch(() => ({ rows: [] }));
    const have = rows[0]?.value;
    const same =
      have && ['version', 'apps', 'total', 'bigCount', 'days', 'day'].every((k) => have[k] === want[k]);
    return same ? { ...have, cached: true } : null;
  } finally {
    await db.end();
  }
}

/** A new reads database: schema through the CLI, then the dataset, before any server starts. */
async function buildReadsDataset(dist, cluster, url) {
  const spec = PLAN.reads;
  await recreateDatabase(cluster.url, 'bench_reads');
  await cli(dist, url, ['migrate']);
  const big = await cli(dist, url, ['apps', 'create', '--name', 'bench-reads-big']);
  const db = await connect(url);
  try {
    await db.query(`CREATE TABLE bench_meta (name text PRIMARY KEY, value jsonb NOT NULL)`);
    const smallApps = await insertApps(db, spec.apps - 1, 'bench-reads');
    const now = Date.now();
    log(`reads dataset: generating ${spec.total} events in ${spec.apps} apps over ${spec.days} days`);
    await generateEvents(url, {
      bigApp: big.id,
      smallApps,
      total: spec.total,
      bigCount: spec.bigCount,
      days: spec.days,
      now,
      onDay: (d, n) => d % 10 === 0 && log(`reads dataset: ${d}/${n} days`),
    });
    const meta = {
      version: READS_DATASET_VERSION,
      ...spec,
      day: new Date(now).toISOString().slice(0, 10),
      bigApp: big.id,
      generatedAt: new Date(now).toISOString(),
      totalSeconds: (Date.now() - now) / 1000,
    };
    await db.query(`INSERT INTO bench_meta (name, value) VALUES ('reads', $1)`, [meta]);
    log(`reads dataset: ${spec.total} events in ${meta.totalSeconds.toFixed(1)} s`);
    return { ...meta, cached: false };
  } finally {
    await db.end();
  }
}

async function timedGets(url, headers, requests) {
  // A few requests first so that the plan and the pages are warm, as they are in service.
  await runLoad({ url, headers, connections: 1, amount: Math.min(5, requests) });
  const r = await runLoad({ url, headers, connections: 1, amount: requests, maxSeconds: 120 });
  return {
    requests: r.requests,
    latencyMs: r.latencyMs,
    errors: r.errors + r.timeouts,
    non2xx: r.non2xx,
    stoppedEarly: r.stoppedEarly,
  };
}

async function readsPhase(dist, cluster, results) {
  const url = withDatabase(cluster.url, 'bench_reads');
  let dataset = await cachedReadsDataset(cluster, url);
  if (dataset)
    log(`reads dataset: reusing the cached one (${dataset.total} events, generated ${dataset.generatedAt})`);
  else dataset = await buildReadsDataset(dist, cluster, url);
  const server = await startServer({ dist, databaseUrl: url });
  log(`server pid ${server.pid} on ${server.baseUrl} (bench_reads)`);
  let services;
  try {
    const appId = dataset.bigApp;
    // Keys through the same services the CLI calls, in this process: two fewer process starts.
    services = await openServices(dist, url);
    const ingestKey = (await services.createIngestKey(appId)).key;
    const apiKey = (await services.createApiKey(appId, ['events:read', 'rollups:read'])).key;
    const auth = { authorization: `Bearer ${apiKey}` };
    const db = await connect(url);
    try {
      results.readsDataset = {
        events: Number((await db.query('SELECT count(*) AS n FROM events')).rows[0].n),
        bigAppEvents: await countEvents(db, appId),
        apps: dataset.apps,
        days: dataset.days,
        cached: dataset.cached,
        generatedAt: dataset.generatedAt,
        generationSeconds: dataset.totalSeconds,
      };

      // Rollups: a full recompute of the big app from nothing, through the service itself.
      {
        await db.query('DELETE FROM rollups WHERE app_id = $1', [appId]);
        await db.query('DELETE FROM rollup_dirty');
        let t0 = process.hrtime.bigint();
        const full = await services.compute({ appId });
        const fullSeconds = Number(process.hrtime.bigint() - t0) / 1e9;
        const stored = await countEvents(db, appId);
        const totals = await db.query(
          `SELECT coalesce(sum(events), 0)::bigint AS n FROM rollups WHERE app_id = $1 AND event_name = ''`,
          [appId],
        );
        check(
          'rollups: day totals == stored events',
          Number(totals.rows[0].n) === stored,
          `sum of total rows ${totals.rows[0].n}, events ${stored}`,
        );
        log(`rollups full: ${full.days} days, ${full.rows} rows in ${fullSeconds.toFixed(2)} s`);

        // Incremental: new events through the real ingest endpoint, then one scheduled run.
        const batches = PLAN.incrementalEvents / 100;
        const runId = `inc-${Date.now().toString(36)}`;
        const templates = Array.from({ length: 8 }, (_, i) => batchTemplate(700 + i, 100));
        const load = await runLoad({
          url: `${server.baseUrl}/api/ingest`,
          method: 'POST',
          headers: ingestHeaders(ingestKey),
          body: (i) => templates[i % 8].render(`${runId}.${i}`),
          connections: 4,
          amount: batches,
          count: true,
        });
        check(
          'rollups: incremental events accepted',
          load.totals.accepted === PLAN.incrementalEvents,
          `accepted ${load.totals.accepted} of ${PLAN.incrementalEvents}`,
        );
        const today = new Date().toISOString().slice(0, 10);
        const todayBefore = await db.query(
          `SELECT coalesce(sum(events), 0)::bigint AS n FROM rollups WHERE app_id = $1 AND event_name = '' AND day = $2`,
          [appId, today],
        );
        t0 = process.hrtime.bigint();
        const inc = await services.run();
        const incSeconds = Number(process.hrtime.bigint() - t0) / 1e9;
        const todayAfter = await db.query(
          `SELECT coalesce(sum(events), 0)::bigint AS n FROM rollups WHERE app_id = $1 AND event_name = '' AND day = $2`,
          [appId, today],
        );
        const grew = Number(todayAfter.rows[0].n) - Number(todayBefore.rows[0].n);
        check(
          'rollups: incremental run counts the new events exactly',
          grew === load.totals.accepted,
          `today's total grew by ${grew}, accepted ${load.totals.accepted}`,
        );
        log(`rollups incremental: ${inc.days} days in ${incSeconds.toFixed(2)} s`);
        results.rollups = {
          full: { seconds: fullSeconds, days: full.days, rows: full.rows, events: stored },
          incremental: {
            seconds: incSeconds,
            days: inc.days,
            rows: inc.rows,
            newEvents: load.totals.accepted,
          },
        };
      }
      await db.query('ANALYZE rollups');

      // Reads, one connection, sequential: latency, not throughput.
      const base = `${server.baseUrl}/api/v1/events?appId=${appId}&limit=1000`;
      const n = PLAN.reads.requests;
      const first = await fetch(base, { headers: auth });
      const firstRows = first.ok ? (await first.json()).length : 0;
      check(
        'reads: events page answers 1000 rows',
        first.status === 200 && firstRows === 1000,
        `status ${first.status}, rows ${firstRows}`,
      );
      const reads = {};
      reads.eventsPage = { ...(await timedGets(base, auth, n)), rows: firstRows };
      const byName = `${base}&eventName=Screen.viewed`;
      const named = await fetch(byName, { headers: auth });
      const namedRows = named.ok ? await named.json() : [];
      check(
        'reads: eventName filter answers only that name',
        named.status === 200 &&
          namedRows.length === 1000 &&
          namedRows.every((e) => e.eventName === 'Screen.viewed'),
        `status ${named.status}, rows ${namedRows.length}`,
      );
      reads.eventsPageByName = { ...(await timedGets(byName, auth, n)), rows: namedRows.length };
      // Walk nine pages with the cursor, then time the tenth.
      let next = base;
      const seen = new Set();
      let walked = 0;
      for (let page = 1; page < 10; page++) {
        const res = await fetch(next, { headers: auth });
        const body = res.ok ? await res.json() : [];
        body.forEach((e) => seen.add(e.id));
        walked += body.length;
        const cursor = res.headers.get('x-next-cursor');
        if (!cursor) break;
        next = `${base}&cursor=${encodeURIComponent(cursor)}`;
      }
      check(
        'reads: cursor walk gives 9 distinct full pages',
        walked === 9000 && seen.size === 9000,
        `${walked} rows, ${seen.size} distinct`,
      );
      const tenth = await fetch(next, { headers: auth });
      const tenthRows = tenth.ok ? await tenth.json() : [];
      check(
        'reads: tenth page continues the walk',
        tenth.status === 200 && tenthRows.length === 1000 && tenthRows.every((e) => !seen.has(e.id)),
        `status ${tenth.status}, rows ${tenthRows.length}`,
      );
      reads.eventsTenthPage = { ...(await timedGets(next, auth, n)), rows: tenthRows.length };
      const rollupsUrl = `${server.baseUrl}/api/v1/rollups?appId=${appId}&range=30d`;
      const rolled = await fetch(rollupsUrl, { headers: auth });
      const rolledRows = rolled.ok ? await rolled.json() : [];
      check(
        'reads: rollups range=30d answers rows',
        rolled.status === 200 && rolledRows.length > 0,
        `status ${rolled.status}, rows ${rolledRows.length}`,
      );
      reads.rollups30d = { ...(await timedGets(rollupsUrl, auth, n)), rows: rolledRows.length };
      for (const [k, v] of Object.entries(reads)) {
        check(
          `reads ${k}: no errors`,
          v.errors + v.non2xx === 0 && !v.stoppedEarly,
          `errors ${v.errors}, non-2xx ${v.non2xx}`,
        );
        log(`reads ${k}: p50 ${v.latencyMs.p50} ms, p99 ${v.latencyMs.p99} ms`);
      }
      results.reads = reads;
    } finally {
      await db.end();
    }
  } finally {
    await services?.close();
    await server.stop();
  }
}

// ---------------------------------------------------------------------------------------------

async function main() {
  fs.mkdirSync(CACHE, { recursive: true });
  fs.mkdirSync(path.join(BENCH, 'results'), { recursive: true });
  const dist = await snapshotDist();
  const cluster = await startCluster();
  const admin = await connect(withDatabase(cluster.url, 'postgres'));
  const pgVersion = (await admin.query('SHOW server_version')).rows[0].server_version;
  await admin.end();
  log(`PostgreSQL ${pgVersion} in ${cluster.dir}`);
  if (flags.robustness)
    return robustnessMode({
      dist,
      cluster,
      quick: QUICK,
      log,
      stopCluster,
      resultsDir: path.join(BENCH, 'results'),
    });
  const results = {
    schema: 1,
    mode: QUICK ? 'quick' : 'full',
    timestamp: new Date().toISOString(),
    commit: git(['rev-parse', 'HEAD']),
    dirty: git(['status', '--porcelain', '--', 'src', 'migrations']) !== '',
    cores: os.cpus().length,
    machine: {
      cores: os.cpus().length,
      cpu: os.cpus()[0]?.model ?? 'unknown',
      memoryGb: Math.round(os.totalmem() / 1e9),
      node: process.version,
      platform: `${os.platform()} ${os.release()}`,
      postgres: pgVersion,
    },
    plan: PLAN,
  };
  try {
    await ingestPhase(dist, cluster, results);
    await httpCeilingPhase(results);
    const i64 = results.ingest?.batch100_c64?.eventsPerSec;
    results.ratios = {
      ingest_vs_db_ceiling: i64 / results.dbCeiling?.rowsPerSec,
      ingest_vs_http_ceiling: i64 / results.httpCeiling?.c64?.eventsPerSec,
    };

    const validator = await loadValidator(dist);
    if (validator) {
      results.validation = benchValidator(validator, PLAN.validationEvents, rng(42));
      check(
        'validator: rejects exactly the invalid events',
        results.validation.mismatches === 0,
        `${results.validation.mismatches} events judged differently from their construction`,
      );
      log(`validator: ${Math.round(results.validation.eventsPerSec)} events/s on one core`);
    } else {
      check('validator: found in dist/src/ingest', false, 'no event validator export found');
    }
    const dto = loadDtoValidator(dist);
    if (dto && results.validation) {
      results.validation.classValidatorBaseline = benchDtoValidator(dto, PLAN.validationEvents / 10, rng(42));
      log(
        `class-validator DTOs: ${Math.round(results.validation.classValidatorBaseline.eventsPerSec)} events/s on one core`,
      );
    }

    if (!flags['skip-reads']) await readsPhase(dist, cluster, results);
  } finally {
    if (cluster.temporary) {
      await stopCluster(cluster.dir);
      fs.rmSync(cluster.dir, { recursive: true, force: true });
    } else if (!flags['keep-pg']) {
      await stopCluster(cluster.dir);
    }
    fs.rmSync(dist, { recursive: true, force: true });
  }

  results.durationSeconds = (Date.now() - started) / 1000;
  results.targets = evaluateTargets(results);
  results.correctness = correctness;
  // Only a complete, unprofiled full run is the record; anything less goes beside it.
  const partial = flags['skip-reads'] || flags.profile;
  const file = path.join(BENCH, 'results', QUICK ? 'quick.json' : partial ? 'partial.json' : 'latest.json');
  fs.writeFileSync(file, JSON.stringify(results, null, 2) + '\n');
  process.stdout.write(renderSummary(results) + '\n');
  process.stdout.write(`\nResults: ${path.relative(ROOT, file)}\n`);
  return correctness.every((c) => c.pass) ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`benchmark failed: ${err instanceof Error ? (err.stack ?? err.message) : err}\n`);
    process.exit(1);
  },
);
