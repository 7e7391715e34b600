/* global fetch */
// `npm run bench -- --timezones [--tz-events <n>]`: what an app time zone costs. Figures go into
// the `timezones` section of bench/results/latest.json (the rest of the file is kept):
//  - the 30-day rollup read (GET /api/v1/rollups?range=30d, p50 over HTTP) of one app in UTC and
//    then in America/New_York, on the same data;
//  - the recomputation of every retained day after the zone change, for a 30-day app of
//    `--tz-events` events (default 2,000,000), start to swap;
//  - the ingest hot-path cost of the zone: naming the local days of the dirty marks
//    (dirtyMarkArrays) per event, in UTC and in America/New_York.
// It runs on a temporary embedded PostgreSQL of its own.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { ensure, makeTemporaryDir, stop as stopCluster } from '../../src/database/embedded-pg.mjs';
import { connect, generateEvents, insertApps } from '../lib/db.mjs';
import { runLoad } from '../lib/load.mjs';
import { cli, freePort, startServer } from '../lib/processes.mjs';
import { flags, snapshotDist } from '../lib/common.mjs';
import { saveResultsSection } from '../lib/report.mjs';

export const TIMEZONE_TARGETS = { readP50Ms: 10, recomputeSeconds: 20, ingestNsPerEvent: 200 };

const ZONE = 'America/New_York';
const DAYS = 30;
const READS = 200;

async function readP50s(baseUrl, apps, apiKey) {
  const get = (appId) => ({
    url: `${baseUrl}/api/v1/rollups?appId=${appId}&range=30d`,
    headers: { authorization: `Bearer ${apiKey}` },
  });
  const out = {};
  for (const [label, appId] of Object.entries(apps)) {
    const { url, headers } = get(appId);
    const rows = await (await fetch(url, { headers })).json();
    await runLoad({ url, headers, connections: 1, amount: 10 });
    out[label] = { rows: rows.length, zones: [...new Set(rows.map((x) => x.timezone))], latencies: [] };
  }
  // Alternate the apps in rounds, so that both see the same load from the rest of the machine.
  for (let round = 0; round < 4; round++) {
    for (const [label, appId] of Object.entries(apps)) {
      const r = await runLoad({ ...get(appId), connections: 1, amount: READS / 4, maxSeconds: 60 });
      out[label].latencies.push(r.latencyMs.p50);
    }
  }
  for (const o of Object.values(out)) {
    o.p50Ms = [...o.latencies].sort((a, b) => a - b)[Math.floor(o.latencies.length / 2)];
  }
  return out;
}

/**
 * The cost of naming the marks' local days (dirtyMarkArrays), in ns per event: all-in for
 * statements of 100 events of the last ten minutes, and the marginal cost of one more event
 * (from statements of 100 and 1,000 events). Best of five passes.
 */
function markCost(dist, zone) {
  const require = createRequire(path.join(dist, 'src', 'main.js'));
  const { dirtyMarkArrays } = require(path.join(dist, 'src/ingest/dirty-marks.js'));
  const now = Date.now();
  const perEvent = (size) => {
    const batches = Array.from({ length: Math.round(200_000 / size) }, (_, b) => ({
      appId: '0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c',
      timezone: zone,
      events: Array.from({ length: size }, (_, i) => ({ ts: now - ((b * size + i) % 600_000) })),
    }));
    let best = Infinity;
    for (let pass = 0; pass < 6; pass++) {
      const started = process.hrtime.bigint();
      for (const batch of batches) dirtyMarkArrays([batch]);
      if (pass > 0) best = Math.min(best, Number(process.hrtime.bigint() - started));
    }
    return best / (batches.length * size);
  };
  const at100 = perEvent(100);
  const at1000 = perEvent(1000);
  // t(n) = fixed + n * marginal, per statement.
  const marginal = (1000 * at1000 - 100 * at100) / 900;
  return {
    nsPerEventAt100: at100,
    marginalNsPerEvent: marginal,
    fixedUsPerStatement: (100 * (at100 - marginal)) / 1000,
  };
}

async function openRollups(dist, url) {
  const require = createRequire(path.join(dist, 'src', 'main.js'));
  require('reflect-metadata');
  const { loadConfig } = require(path.join(dist, 'src/config/config.js'));
  const { openServices } = require(path.join(dist, 'src/cli/services.js'));
  const services = await openServices(
    {
      ...loadConfig({ DATABASE_URL: url, LOG_LEVEL: 'warn' }),
      rollupsEnabled: false,
    },
    ['rollups'],
  );
  return services;
}

/** Sets the zone and runs the computation until the new set is swapped in; checks its totals. */
async function zoneChange(db, rollups, appId, actor) {
  const started = Date.now();
  await rollups.setTimezone(appId, ZONE, actor);
  let runs = 0;
  for (;;) {
    await rollups.run(Date.now(), 3_600_000);
    runs++;
    const { rows } = await db.query(`SELECT 1 FROM rollup_rezone_jobs WHERE app_id = $1`, [appId]);
    if (!rows.length) break;
  }
  const seconds = (Date.now() - started) / 1000;
  const { rows } = await db.query(
    `SELECT (SELECT coalesce(sum(events), 0) FROM rollups WHERE app_id = $1 AND event_name = '')::bigint AS n,
            (SELECT count(*) FROM events WHERE app_id = $1)::bigint AS stored,
            (SELECT count(DISTINCT timezone) FROM rollups WHERE app_id = $1) AS zones`,
    [appId],
  );
  const counted = Number(rows[0].n);
  const stored = Number(rows[0].stored);
  return {
    seconds,
    runs,
    eventsCounted: counted,
    eventsStored: stored,
    exact: counted === stored,
    zonesInRows: Number(rows[0].zones),
  };
}

export async function timezonesBenchmarkMain({ root, log }) {
  const total = Number(flags['tz-events'] ?? 2_000_000);
  const dist = await snapshotDist();
  const dir = await makeTemporaryDir('bench-tz');
  const { url } = await ensure(dir, await freePort());
  let server;
  let services;
  try {
    await cli(dist, url, ['migrate']);
    const db = await connect(url);
    const [bigApp, smallApp] = await insertApps(db, 2, 'tz');
    const now = Date.now();
    log(`timezones: generating ${total} events over ${DAYS} days`);
    await generateEvents(url, {
      bigApp,
      smallApps: [smallApp],
      total: total + 1000,
      bigCount: total,
      days: DAYS,
      now,
    });
    services = await openRollups(dist, url);
    const actor = { type: 'cli', osUser: 'bench' };
    const rollups = services.rollups();
    const started = Date.now();
    const utcCompute = await rollups.compute({ appId: bigApp });
    const utcComputeSeconds = (Date.now() - started) / 1000;
    log(`timezones: UTC compute ${utcCompute.days} days in ${utcComputeSeconds.toFixed(2)} s`);
    // A twin app in UTC with a copy of the same rows, read alternately with the zoned one.
    const [twin] = await insertApps(db, 1, 'tz-twin');
    await db.query(
      `INSERT INTO rollups (app_id, day, is_test_mode, event_name, events, unique_users, unique_sessions,
                            fv_count, fv_sum, fv_min, fv_max, computed_at, timezone, day_end)
       SELECT $2, day, is_test_mode, event_name, events, unique_users, unique_sessions, fv_count, fv_sum,
              fv_min, fv_max, computed_at, timezone, day_end FROM rollups WHERE app_id = $1`,
      [bigApp, twin],
    );
    const apiKey = (await services.keys.createApiKey([bigApp, twin], ['rollups:read'], null, 'bench', actor))
      .key;

    const recompute = await zoneChange(db, rollups, bigApp, actor);
    log(`timezones: zone change recomputed in ${recompute.seconds.toFixed(2)} s (${recompute.runs} runs)`);
    server = await startServer({ dist, databaseUrl: url });
    const reads = await readP50s(server.baseUrl, { utc: twin, zoned: bigApp }, apiKey);
    log(`timezones: read p50 ${reads.utc.p50Ms} ms in UTC, ${reads.zoned.p50Ms} ms in ${ZONE}`);
    await db.end();

    const utcMarks = markCost(dist, 'UTC');
    const zonedMarks = markCost(dist, ZONE);
    log(`timezones: marks ${JSON.stringify({ utc: utcMarks, zoned: zonedMarks })}`);

    const section = {
      measuredAt: new Date().toISOString(),
      note: 'One run; the machine load average at the end is loadAverage.',
      loadAverage: os.loadavg()[0],
      events: total,
      days: DAYS,
      zone: ZONE,
      targets: TIMEZONE_TARGETS,
      read30d: reads,
      utcComputeSeconds,
      recompute,
      ingestMarks: { utc: utcMarks, zoned: zonedMarks },
      pass: {
        readP50: reads.zoned.p50Ms <= TIMEZONE_TARGETS.readP50Ms,
        recompute: recompute.seconds <= TIMEZONE_TARGETS.recomputeSeconds,
        ingest: zonedMarks.nsPerEventAt100 <= TIMEZONE_TARGETS.ingestNsPerEvent,
      },
    };
    saveResultsSection(root, 'timezones', section);
    process.stdout.write(`${JSON.stringify(section, null, 2)}\n`);
    return section.recompute.exact ? 0 : 1;
  } finally {
    await server?.stop?.().catch(() => undefined);
    await services?.close().catch(() => undefined);
    await stopCluster(dir).catch(() => undefined);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
