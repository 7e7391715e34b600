// Ingest load: batch sizes, connections, gzip and duplicates, checked against the database.
import path from 'node:path';
import zlib from 'node:zlib';
import { batchTemplate } from '../lib/events.mjs';
import { runLoad, percentiles } from '../lib/load.mjs';
import { clusterCpuSeconds, cpuSecondsOf, startServer } from '../lib/processes.mjs';
import {
  commitProbe,
  connect,
  countDedup,
  countEvents,
  dbCeiling,
  insertApps,
  recreateDatabase,
  withDatabase,
} from '../lib/db.mjs';
import { loadWritePath } from '../lib/write-path.mjs';
import { hottestFunctions } from '../lib/report.mjs';
import { profileLayers } from './profile-layers.mjs';
import { clientScenario } from './client.mjs';
import {
  CACHE,
  flags,
  INGEST_ONLY,
  QUICK,
  PLAN,
  log,
  check,
  makeTenant,
  ingestHeaders,
} from '../lib/common.mjs';

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

export async function ingestPhase(dist, cluster, results) {
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
    if (INGEST_ONLY) {
      results.ingest = ingest;
      return;
    }
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
    results.client = await clientScenario({
      baseUrl: server.baseUrl,
      ingestKey: tenant.ingestKey,
      ingestEventsPerSec: eventsRate,
      quick: QUICK,
      log,
    });

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
    if (flags.profile) {
      results.ingestProfile = hottestFunctions(profileDir, server.pid);
      if (results.ingestProfile) results.ingestProfile.layers = profileLayers(results.ingestProfile.file);
    }
  }
}
