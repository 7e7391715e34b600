/* global fetch */
// Reads and rollups: a large dataset, GET latencies and the rollup computation.
import { batchTemplate } from '../lib/events.mjs';
import { runLoad } from '../lib/load.mjs';
import { cli, startServer } from '../lib/processes.mjs';
import {
  connect,
  countEvents,
  databaseExists,
  generateEvents,
  insertApps,
  recreateDatabase,
  withDatabase,
} from '../lib/db.mjs';
import { openServices } from '../lib/services.mjs';
import { checkFilteredReads, filteredReadsUnderIngest } from './filtered-reads.mjs';
import { READS_DATASET_VERSION, PLAN, log, check, ingestHeaders } from '../lib/common.mjs';

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

export async function readsPhase(dist, cluster, results) {
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

      // Rollups: a full recompute of the big app from nothing, through the service itself. The
      // insights' digests go too, so that every day is computed again rather than kept.
      {
        await db.query('DELETE FROM rollups WHERE app_id = $1', [appId]);
        await db.query('DELETE FROM insight_day_sources WHERE app_id = $1', [appId]);
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
      results.filteredReads = await filteredReadsUnderIngest({
        baseUrl: server.baseUrl,
        db,
        createApp: async () => (await insertApps(db, 1, 'bench-filters'))[0],
        createKeys: async (id) => ({
          ingestKey: (await services.createIngestKey(id)).key,
          apiKey: (await services.createApiKey(id, ['events:read'])).key,
        }),
        peakEventsPerSec: results.ingest?.batch100_c64?.eventsPerSec || 5000,
        ...PLAN.filteredReads,
        log,
      });
      checkFilteredReads(results.filteredReads, check, log);
    } finally {
      await db.end();
    }
  } finally {
    await services?.close();
    await server.stop();
  }
}
