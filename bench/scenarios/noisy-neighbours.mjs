/* global fetch, URLSearchParams */
// `npm run bench -- --noisy-neighbours`: what one tenant's abuse costs another, as latency figures (the
// jest specs test/read-isolation and test/ingest-isolation check only the outcomes).
//
// - reads: one key fires expensive reads at 45/s (within the default read rate) while another
//   app reads back to back; quiet and loaded rounds alternate so that a change in the machine's
//   load hits both. Figure: the victim's p99 under load over its quiet p99 (target ≤ 3).
// - ingest: one key holds stalled uploads worth twice the in-flight budget while another app
//   ingests small batches. Figure: the victim's median under load over its quiet median (target ≤ 5).
//
// With --quick the rounds are few and only a loose check is made: every victim request answered
// 200, the noisy key was served and then refused for its read time. The figures go into the
// `noisyNeighbours` section of bench/results/latest.json (quick.json with --quick).
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { destroy, ensure, makeTemporaryDir } from '../../src/database/embedded-pg.mjs';
import { median, waitFor } from '../../test/support/harness.js';
import { connect } from '../lib/db.mjs';
import { cli, freePort, startServer } from '../lib/processes.mjs';

const HEAVY_ROWS = 100_000;

const p99 = (xs) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil(xs.length * 0.99) - 1)];

async function timed(fn) {
  const started = process.hrtime.bigint();
  const status = await fn();
  return { ms: Number(process.hrtime.bigint() - started) / 1e6, status };
}

async function tenant(dist, url, name) {
  const app = await cli(dist, url, ['apps', 'create', '--name', name]);
  const ingest = await cli(dist, url, ['keys', 'create-ingest', '--app', app.id]);
  const api = await cli(dist, url, ['keys', 'create-api', '--app', app.id, '--scope', 'events:read']);
  return { appId: app.id, liveKey: ingest.key, apiKey: api.key };
}

const get = (base, key, query) =>
  fetch(`${base}/api/v1/events?${new URLSearchParams(query)}`, {
    headers: { authorization: `Bearer ${key}` },
  }).then(async (res) => {
    await res.arrayBuffer();
    return res.status;
  });

const ingest = (base, key, tag) =>
  fetch(`${base}/api/ingest`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      events: Array.from({ length: 5 }, (_, i) => ({ eventName: 'load', eventId: `${tag}-${i}` })),
    }),
  }).then(async (res) => {
    await res.arrayBuffer();
    return res.status;
  });

/**
 * The refusal itself: on a fast machine the paced loop above may never overlap two heavy reads,
 * so bursts of four at once follow until the key's concurrency or time budget refuses one
 * (at most 50 bursts).
 */
async function noisyUntilRefused(base, noisy, statuses) {
  const heavy = { appId: noisy.appId, eventName: 'a', sessionId: 's', limit: 1 };
  const count = (s) => (statuses[s] = (statuses[s] ?? 0) + 1);
  for (let burst = 0; burst < 50 && !statuses[429]; burst++) {
    await Promise.all(Array.from({ length: 4 }, () => get(base, noisy.apiKey, heavy).then(count)));
  }
}

async function readIsolation({ base, url, noisy, quiet, rounds }) {
  const db = await connect(url);
  await db.query(
    `INSERT INTO events (app_id, ts, received_at, event_name, session_id, is_test_mode)
     SELECT $1, now() - make_interval(secs => g / 1000.0), now() - make_interval(secs => g / 1000.0),
            CASE WHEN g % 2 = 0 THEN 'a' ELSE 'b' END, CASE WHEN g % 2 = 1 THEN 's' ELSE 'x' END, false
       FROM generate_series(1, $2::int) AS g`,
    [noisy.appId, HEAVY_ROWS],
  );
  await db.query(`VACUUM (ANALYZE) events`);
  await db.end();
  await ingest(base, quiet.liveKey, 'quiet-app');
  const victim = async (n, into) => {
    for (let i = 0; i < n; i++)
      into.push(await timed(() => get(base, quiet.apiKey, { appId: quiet.appId, limit: 1 })));
  };
  const quietRuns = [];
  const loadedRuns = [];
  const noisyStatuses = {};
  await victim(20, []);
  for (let round = 0; round < rounds; round++) {
    await victim(15, quietRuns);
    const inFlight = [];
    // Pacing: an open loop at 45 requests/s.
    const fire = setInterval(() => {
      const heavy = { appId: noisy.appId, eventName: 'a', sessionId: 's', limit: 1 };
      inFlight.push(
        get(base, noisy.apiKey, heavy).then((s) => (noisyStatuses[s] = (noisyStatuses[s] ?? 0) + 1)),
      );
    }, 1000 / 45);
    await waitFor(() => inFlight.length > 0, { what: 'the first noisy read' });
    await victim(15, loadedRuns);
    clearInterval(fire);
    await Promise.all(inFlight);
  }
  await noisyUntilRefused(base, noisy, noisyStatuses);
  const ms = (runs) => runs.map((r) => r.ms);
  return {
    rounds,
    victimAll200: [...quietRuns, ...loadedRuns].every((r) => r.status === 200),
    noisyStatuses,
    quietP50Ms: median(ms(quietRuns)),
    quietP99Ms: p99(ms(quietRuns)),
    loadedP50Ms: median(ms(loadedRuns)),
    loadedP99Ms: p99(ms(loadedRuns)),
    p99Ratio: p99(ms(loadedRuns)) / p99(ms(quietRuns)),
  };
}

/** An ingest that declares 64,000 bytes and sends 60,000 of them, then stalls. */
function stalledUpload(base, key) {
  const { hostname, port } = new URL(base);
  const req = http.request({
    host: hostname,
    port,
    method: 'POST',
    path: '/api/ingest',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': 64_000 },
  });
  req.on('error', () => undefined);
  req.write(`{"events":[{"eventName":"${'x'.repeat(60_000 - 27)}"}]`);
  return req;
}

async function ingestIsolation({ base, attacker, victim }) {
  const runs = async (tag, n) => {
    const out = [];
    for (let i = 0; i < n; i++) out.push(await timed(() => ingest(base, victim.liveKey, `${tag}-${i}`)));
    return out;
  };
  await runs('warm', 5);
  const quiet = await runs('quiet', 20);
  const stalled = Array.from({ length: 8 }, () => stalledUpload(base, attacker.liveKey));
  try {
    await waitFor(
      async () => {
        const text = await (await fetch(`${base}/metrics`)).text();
        return Number(/^tally_ingest_inflight_bytes (\d+)/m.exec(text)?.[1] ?? 0) >= 60_000;
      },
      { what: 'the held upload' },
    );
    const loaded = await runs('loaded', 20);
    const ms = (r) => r.map((x) => x.ms);
    return {
      victimAll200: [...quiet, ...loaded].every((r) => r.status === 200),
      quietP50Ms: median(ms(quiet)),
      loadedP50Ms: median(ms(loaded)),
      p50Ratio: median(ms(loaded)) / Math.max(median(ms(quiet)), 5),
    };
  } finally {
    stalled.forEach((r) => r.destroy());
  }
}

export async function noisyNeighboursMain({ root, log, quick }) {
  const dist = path.join(root, 'dist');
  const dir = await makeTemporaryDir('noisy-neighbours');
  let server;
  try {
    const { url } = await ensure(dir, await freePort());
    const tenants = [];
    for (const name of ['noisy', 'quiet', 'attacker', 'victim'])
      tenants.push(await tenant(dist, url, `iso-${name}`));
    server = await startServer({
      dist,
      databaseUrl: url,
      // The limits under test at their defaults; only the victim's request rate is out of reach.
      env: {
        READ_RATE_REQUESTS: '100000',
        READ_MAX_CONCURRENT_PER_KEY: '2',
        READ_TIME_MS_PER_SECOND: '1000',
        INGEST_MAX_BYTES: '65536',
        INGEST_MAX_INFLIGHT_BYTES: '262144',
      },
    });
    const base = server.baseUrl;
    const reads = await readIsolation({
      base,
      url,
      noisy: tenants[0],
      quiet: tenants[1],
      rounds: quick ? 3 : 40,
    });
    const ingestFigures = await ingestIsolation({ base, attacker: tenants[2], victim: tenants[3] });
    const checks = {
      victimReadsAll200: reads.victimAll200,
      noisyServedThenRefused: (reads.noisyStatuses[200] ?? 0) > 0 && (reads.noisyStatuses[429] ?? 0) > 0,
      victimIngestsAll200: ingestFigures.victimAll200,
      ...(quick
        ? {}
        : { readP99RatioWithin3: reads.p99Ratio <= 3, ingestP50RatioWithin5: ingestFigures.p50Ratio <= 5 }),
    };
    log(`noisy neighbours: reads ${JSON.stringify(reads)}`);
    log(`noisy neighbours: ingest ${JSON.stringify(ingestFigures)}`);
    const file = path.join(root, 'bench', 'results', quick ? 'quick.json' : 'latest.json');
    const results = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : {};
    results.noisyNeighbours = {
      timestamp: new Date().toISOString(),
      quick,
      reads,
      ingest: ingestFigures,
      checks,
    };
    fs.writeFileSync(file, JSON.stringify(results, null, 2) + '\n');
    const failed = Object.entries(checks).filter(([, ok]) => !ok);
    for (const [name] of failed) log(`noisy neighbours: FAILED ${name}`);
    process.stdout.write(`\nResults: ${path.relative(root, file)} (noisyNeighbours)\n`);
    return failed.length ? 1 : 0;
  } finally {
    await server?.stop();
    await destroy(dir).catch(() => undefined);
  }
}
