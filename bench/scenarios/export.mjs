/* global fetch, performance */
// `npm run bench -- --export [--export-events N] [--export-large-events M]`: the raw export
// (GET /api/v1/export) on one large day of one app, and on M large events (about 29 KB each,
// default 12,000: about 350 MB of NDJSON) of another. Written to the `export` section of
// bench/results/latest.json (the rest is kept).
//
// An embedded PostgreSQL in a temporary folder; N events (default 500,000; the target dataset is
// 2,000,000) received over one UTC day, 5 % of them late (event time two days earlier, so in an
// older partition). Measured, one after the other, each through node:http with no decoding:
//  - NDJSON, gzip and Parquet exports of the whole day: events/s;
//  - the server's RSS: its peak during each NDJSON and Parquet export over its idle RSS before it,
//    with the small events and with the large ones, and V8's external memory after an export;
//  - paging GET /api/v1/events with limit=1000 over the same app: events/s, and the ratio;
//  - another app's ingest rate (4 clients, 100-event batches) alone, then during NDJSON exports.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import {
  clusterDir,
  makeTemporaryDir,
  ensure,
  stop as stopCluster,
} from '../../src/database/embedded-pg.mjs';
import { connect } from '../lib/db.mjs';
import { cli, clusterCpuSeconds, cpuSecondsOf, freePort, startServer } from '../lib/processes.mjs';
import { flags, snapshotDist } from '../lib/common.mjs';

const DAY_MS = 86_400_000;
const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });

const isoDay = (t) => new Date(t).toISOString().slice(0, 10);

/** Creates the daily partitions of [first, last] that do not exist yet. */
async function partitions(client, first, last) {
  for (let day = first; day <= last; day += DAY_MS) {
    const name = `events_p${isoDay(day).replace(/-/g, '')}`;
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${name} PARTITION OF events
         FOR VALUES FROM ('${isoDay(day)} 00:00:00+00') TO ('${isoDay(day + DAY_MS)} 00:00:00+00')`,
    );
  }
}

/** N events of `appId` received over the UTC day starting at `day`, in whole milliseconds. */
export async function fill(url, appId, day, total, log) {
  const client = await connect(url);
  try {
    await partitions(client, day - 3 * DAY_MS, day + DAY_MS);
    const step = 100_000;
    for (let from = 1; from <= total; from += step) {
      const to = Math.min(total, from + step - 1);
      await client.query(
        `INSERT INTO events (app_id, ts, received_at, event_time, event_name, event_id, anonymous_user_id,
                             session_id, is_test_mode, platform, app_version, locale, float_value, payload_json)
         SELECT $1::uuid, r - CASE WHEN g % 20 = 0 THEN interval '2 days' ELSE interval '300 ms' END, r,
                floor(extract(epoch FROM r) * 1000)::bigint - CASE WHEN g % 20 = 0 THEN 172800000 ELSE 300 END,
                (ARRAY['App.opened', 'Screen.viewed', 'Checkout.completed', 'Search.used'])[1 + g % 4],
                'x.' || g, 'u' || g % 40000, 's' || g % 300000, false,
                (ARRAY['ios', 'android', 'web'])[1 + g % 3], '3.' || g % 9 || '.' || g % 20, 'en-US',
                CASE WHEN g % 5 = 0 THEN (g % 10000) / 100.0 END,
                -- As ingest stores a payload: the compact JSON.stringify text.
                format('{"screen":"%s","step":%s,"trial":%s}', (ARRAY['home', 'cart', 'search'])[1 + g % 3],
                       g % 12, to_json(g % 5 = 0))::json
           FROM (SELECT g, date_trunc('milliseconds', $2::timestamptz + (g - 1) * ($3::float8 * interval '1 ms')) AS r
                   FROM generate_series($4::int, $5::int) AS g) s`,
        [appId, new Date(day).toISOString(), DAY_MS / total, from, to],
      );
      log(`export: ${to} of ${total} events stored`);
    }
    await client.query('ANALYZE events');
  } finally {
    await client.end();
  }
}

/** M events of about 29 KB of `appId`, received 1 ms apart from `from` (payloads as ingest stores them). */
async function fillLarge(url, appId, from, total, log) {
  const client = await connect(url);
  try {
    await partitions(client, from - DAY_MS, from + DAY_MS);
    const step = 2_000;
    for (let first = 1; first <= total; first += step) {
      const last = Math.min(total, first + step - 1);
      await client.query(
        `INSERT INTO events (app_id, ts, received_at, event_name, event_id, is_test_mode, platform, payload_json)
         SELECT $1::uuid, r, r, 'Large.payload', 'large.' || g, false, 'web',
                format('{"n":%s,"blob":"%s"}', g, repeat(md5(g::text), 900))::json
           FROM (SELECT g, $2::timestamptz + g * interval '1 ms' AS r
                   FROM generate_series($3::int, $4::int) AS g) s`,
        [appId, new Date(from).toISOString(), first, last],
      );
      log(`export: ${last} of ${total} large events stored`);
    }
    await client.query('ANALYZE events');
  } finally {
    await client.end();
  }
}

/** GETs `path`, counting bytes and newlines of the body as sent (no decoding). */
export function download(base, path, headers) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    http
      .get(`${base}${path}`, { headers, agent }, (res) => {
        let bytes = 0;
        let lines = 0;
        res.on('data', (chunk) => {
          bytes += chunk.length;
          for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) lines++;
        });
        res.on('end', () =>
          resolve({ status: res.statusCode, bytes, lines, seconds: (performance.now() - started) / 1000 }),
        );
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

/** Pages GET /api/v1/events with limit=1000 for up to `maxPages` pages: events/s. */
export async function paging(base, key, appId, maxPages) {
  const started = performance.now();
  let events = 0;
  let url = `${base}/api/v1/events?appId=${appId}&limit=1000`;
  for (let page = 0; page < maxPages && url; page++) {
    const res = await fetch(url, { headers: { authorization: `Bearer ${key}` } });
    if (!res.ok) throw new Error(`GET /api/v1/events: ${res.status}`);
    events += (await res.json()).length;
    const cursor = res.headers.get('x-next-cursor');
    url = cursor ? `${base}/api/v1/events?appId=${appId}&limit=1000&cursor=${cursor}` : null;
  }
  const seconds = (performance.now() - started) / 1000;
  return { events, seconds, eventsPerSec: events / seconds };
}

let sent = 0;

/** Ingest of another app from 4 clients until `until()` is true: accepted events/s. */
async function ingestLoad(base, key, until) {
  const started = performance.now();
  let accepted = 0;
  const statuses = {};
  const gaps = [];
  const worker = async () => {
    while (!until()) {
      const events = Array.from({ length: 100 }, () => ({ eventName: 'Load.tick', eventId: `l-${sent++}` }));
      const res = await fetch(`${base}/api/ingest`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ events }),
      });
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
      if (res.ok) {
        const body = await res.json();
        // The answer comes after the commit: an upper bound of commit time − receivedAt.
        gaps.push(Date.now() - body.serverTime);
        accepted += body.accepted;
      } else await res.arrayBuffer();
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  gaps.sort((a, b) => a - b);
  const commitGapMs = {
    p50: gaps[Math.floor(gaps.length / 2)],
    p99: gaps[Math.floor(gaps.length * 0.99)],
    max: gaps.at(-1),
  };
  return { eventsPerSec: accepted / ((performance.now() - started) / 1000), statuses, commitGapMs };
}

/** Runs `fn`, with the CPU seconds the server and the database used meanwhile. */
export async function withCpu(server, dir, fn) {
  dir = path.join(await clusterDir(dir), 'pg');
  const node = cpuSecondsOf(server.pid);
  const pg = clusterCpuSeconds(dir);
  const result = await fn();
  return {
    ...result,
    serverCpuSeconds: cpuSecondsOf(server.pid) - node,
    databaseCpuSeconds: clusterCpuSeconds(dir) - pg,
  };
}

/** Apps and keys through the admin CLI, and the day of events of the exported app. */
export async function prepare({ server, url, total, log }) {
  const tenant = await cli(server.dist, url, ['apps', 'create', '--name', 'export-bench']);
  const other = await cli(server.dist, url, ['apps', 'create', '--name', 'export-bench-other']);
  const ingestKey = (await cli(server.dist, url, ['keys', 'create-ingest', '--app', other.id])).key;
  const scopes = ['--scope', 'events:export', '--scope', 'events:read'];
  const apiKey = (await cli(server.dist, url, ['keys', 'create-api', '--app', tenant.id, ...scopes])).key;
  const day = Math.floor(Date.now() / DAY_MS) * DAY_MS - DAY_MS;
  await fill(url, tenant.id, day, total, log);
  return { appId: tenant.id, ingestKey, apiKey, day };
}

/** Another app's ingest for `seconds`, alone, then while NDJSON exports run back to back. */
async function ingestAloneAndDuringExports(server, ingestKey, seconds, exportOnce) {
  let deadline = performance.now() + seconds * 1000;
  const alone = await ingestLoad(server.baseUrl, ingestKey, () => performance.now() > deadline);
  deadline = performance.now() + seconds * 1000;
  const exporting = (async () => {
    while (performance.now() < deadline) await exportOnce();
  })();
  const during = await ingestLoad(server.baseUrl, ingestKey, () => performance.now() > deadline);
  await exporting;
  return {
    aloneEventsPerSec: alone.eventsPerSec,
    duringExportEventsPerSec: during.eventsPerSec,
    ratio: during.eventsPerSec / alone.eventsPerSec,
    statusesAlone: alone.statuses,
    statusesDuringExport: during.statuses,
    // receivedAt → answer (after the commit), ms: what EXPORT_SETTLE_MS must cover.
    commitGapMsAlone: alone.commitGapMs,
    commitGapMsDuringExport: during.commitGapMs,
  };
}

/** Events/s and CPU microseconds per event of one download of `total` events. */
function figuresOf(r, total) {
  return {
    eventsPerSec: total / r.seconds,
    seconds: r.seconds,
    bytes: r.bytes,
    // On a busy machine the wall-clock rate says more about the neighbours than about the
    // export; the CPU each side spent per event does not.
    serverCpuUsPerEvent: (r.serverCpuSeconds / total) * 1e6,
    databaseCpuUsPerEvent: (r.databaseCpuSeconds / total) * 1e6,
    // What one core each for the server and PostgreSQL would sustain, the slower side bounding it.
    projectedEventsPerSecTwoIdleCores: total / Math.max(r.serverCpuSeconds, r.databaseCpuSeconds),
  };
}

/** `fn()`, and the server's peak RSS meanwhile (sampled every 20 ms), in bytes. */
async function withPeakRss(server, fn) {
  let peak = server.memory().rss;
  const sampler = setInterval(() => (peak = Math.max(peak, server.memory().rss)), 20);
  try {
    const result = await fn();
    return { ...result, peakRss: Math.max(peak, server.memory().rss) };
  } finally {
    clearInterval(sampler);
  }
}

/** V8's external memory of the server (buffers outside its heap), in MB, a second from now. */
async function externalMb(server) {
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const metrics = await (await fetch(`${server.baseUrl}/metrics`)).text();
  return Number(/^nodejs_external_memory_bytes (\S+)$/m.exec(metrics)?.[1]) / 1_048_576;
}

const mb = (bytes) => bytes / 1_048_576;

/** One export of `path` with its CPU and the server's peak RSS. */
const exportOnce = (server, dir, path, headers) =>
  withCpu(server, dir, () => withPeakRss(server, () => download(server.baseUrl, path, headers)));

/**
 * NDJSON and Parquet exports of M events of about 29 KB: the RSS each adds at its peak over idle,
 * whatever the events' size, and the external memory left after the NDJSON one.
 */
async function measureLarge({ server, url, dir, total, log }) {
  const tenant = await cli(server.dist, url, ['apps', 'create', '--name', 'export-bench-large']);
  const scopes = ['--scope', 'events:export'];
  const key = (await cli(server.dist, url, ['keys', 'create-api', '--app', tenant.id, ...scopes])).key;
  const from = Date.now() - 3_600_000;
  await fillLarge(url, tenant.id, from, total, log);
  const auth = { authorization: `Bearer ${key}` };
  const path = (format, to = from + 1_800_000) =>
    `/api/v1/export?appId=${tenant.id}&from=${from}&to=${to}&format=${format}`;
  for (const format of ['ndjson', 'parquet']) await download(server.baseUrl, path(format, from + 50), auth);
  const idle = server.memory().rss;
  const externalIdleMb = await externalMb(server);
  const ndjson = await exportOnce(server, dir, path('ndjson'), auth);
  const externalAfterNdjsonMb = await externalMb(server);
  const parquet = await exportOnce(server, dir, path('parquet'), auth);
  log(`export: large events, ndjson ${ndjson.seconds.toFixed(1)} s, parquet ${parquet.seconds.toFixed(1)} s`);
  return {
    events: total,
    ndjsonBytesPerEvent: ndjson.bytes / total,
    ndjson: { ...figuresOf(ndjson, total), lines: ndjson.lines },
    parquet: figuresOf(parquet, total),
    serverRss: {
      idleMb: mb(idle),
      ndjsonGrowthMb: mb(ndjson.peakRss - idle),
      parquetGrowthMb: mb(parquet.peakRss - idle),
    },
    externalMemoryMb: { idle: externalIdleMb, afterNdjson: externalAfterNdjsonMb },
  };
}

async function measure({ server, url, dir, total, log }) {
  const { appId, ingestKey, apiKey, day } = await prepare({ server, url, total, log });
  const auth = { authorization: `Bearer ${apiKey}` };
  const path = (format) => `/api/v1/export?appId=${appId}&from=${day}&to=${day + DAY_MS}&format=${format}`;
  await download(server.baseUrl, path('ndjson'), auth); // warm-up: caches and JIT
  await download(server.baseUrl, path('parquet'), auth);
  const idle = server.memory().rss;
  const ndjson = await exportOnce(server, dir, path('ndjson'), auth);
  const gzip = await exportOnce(server, dir, path('ndjson'), { ...auth, 'accept-encoding': 'gzip' });
  const parquet = await exportOnce(server, dir, path('parquet'), auth);
  const peak = Math.max(ndjson.peakRss, gzip.peakRss, parquet.peakRss);
  log(
    `export: ndjson ${ndjson.seconds.toFixed(1)} s, gzip ${gzip.seconds.toFixed(1)} s, parquet ${parquet.seconds.toFixed(1)} s`,
  );
  const pages = await withCpu(server, dir, () =>
    paging(server.baseUrl, apiKey, appId, Math.min(200, Math.ceil(total / 1000))),
  );
  const otherAppIngest = await ingestAloneAndDuringExports(
    server,
    ingestKey,
    Math.max(5, ndjson.seconds * 2),
    () => download(server.baseUrl, path('ndjson'), auth),
  );
  const cpuPerEvent = (r, n) => (r.serverCpuSeconds + r.databaseCpuSeconds) / n;
  return {
    events: total,
    ndjson: { ...figuresOf(ndjson, total), lines: ndjson.lines },
    gzip: figuresOf(gzip, total),
    parquet: figuresOf(parquet, total),
    serverRss: {
      idleMb: mb(idle),
      peakMb: mb(peak),
      growthMb: mb(peak - idle),
      ndjsonGrowthMb: mb(ndjson.peakRss - idle),
      gzipGrowthMb: mb(gzip.peakRss - idle),
      parquetGrowthMb: mb(parquet.peakRss - idle),
    },
    pagingEvents: {
      ...pages,
      serverCpuUsPerEvent: (pages.serverCpuSeconds / pages.events) * 1e6,
      databaseCpuUsPerEvent: (pages.databaseCpuSeconds / pages.events) * 1e6,
    },
    exportVsPaging: total / ndjson.seconds / pages.eventsPerSec,
    // The same ratio in CPU (server + database) per event, which the neighbours do not distort.
    exportVsPagingByCpu: cpuPerEvent(pages, pages.events) / cpuPerEvent(ndjson, total),
    otherAppIngest,
  };
}

/** Targets of the export (docs/performance.md). */
export const EXPORT_TARGETS = {
  ndjsonEventsPerSec: 150_000,
  rssGrowthMb: 64,
  exportVsPaging: 5,
  ingestRatio: 0.8,
};

export async function exportBenchmarkMain({ root, log, git }) {
  const total = Number(flags['export-events'] ?? 500_000);
  const largeTotal = Number(flags['export-large-events'] ?? 12_000);
  const dist = await snapshotDist();
  const dir = await makeTemporaryDir('bench-export');
  const { url } = await ensure(dir, await freePort());
  let server;
  try {
    server = await startServer({ dist, databaseUrl: url });
    server.dist = dist;
    const figures = await measure({ server, url, dir, total, log });
    figures.largeEvents = await measureLarge({ server, url, dir, total: largeTotal, log });
    const large = figures.largeEvents.serverRss;
    const targets = {
      ndjson: figures.ndjson.eventsPerSec >= EXPORT_TARGETS.ndjsonEventsPerSec,
      rssGrowth:
        Math.max(figures.serverRss.growthMb, large.ndjsonGrowthMb, large.parquetGrowthMb) <=
        EXPORT_TARGETS.rssGrowthMb,
      exportVsPaging: figures.exportVsPaging >= EXPORT_TARGETS.exportVsPaging,
      otherAppIngest: figures.otherAppIngest.ratio >= EXPORT_TARGETS.ingestRatio,
    };
    const section = {
      timestamp: new Date().toISOString(),
      commit: git(['rev-parse', 'HEAD']),
      ...figures,
      targets,
    };
    const file = path.join(root, 'bench', 'results', 'latest.json');
    const latest = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : {};
    latest.export = section;
    fs.writeFileSync(file, JSON.stringify(latest, null, 2) + '\n');
    process.stdout.write(JSON.stringify(section, null, 2) + '\n');
    return 0;
  } finally {
    await server?.stop();
    await stopCluster(dir);
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(dist, { recursive: true, force: true });
    agent.destroy();
  }
}
