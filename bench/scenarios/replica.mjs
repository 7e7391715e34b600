// `npm run bench -- --replica`: reads on a hot standby on the same machine, against the same reads
// on the primary, written to the `replica` section of bench/results/latest.json (the rest of the
// file is kept, and a full run carries the section over).
//
// A primary and a standby streaming from it (test/reliability/replica-pair.mjs), and two servers
// on the primary: one with DATABASE_READ_URL on the standby, one without. In alternating rounds,
// each server takes the same ingest load (100-event batches) while readers page through the
// events of the same app; the round records ingest events/s and the events-page p50/p99. Then,
// under reads, the standby is stopped: the time until the server moved reads to the primary (its
// log line), until the first read that started after that answered, and the 5xx meanwhile.
//
// Everything runs on one machine, so the standby's replay competes with the primary for the
// same cores: the figures show the routing's cost and its failover, not the capacity a standby on
// a machine of its own adds.
/* global fetch, AbortSignal */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { runLoad, percentiles } from '../lib/load.mjs';
import { batchTemplate } from '../lib/events.mjs';
import { freePort, makeTenant, sleep, startServer } from '../../test/reliability/harness.mjs';
import { startReplicaPair, switchedToPrimaryAt } from '../../test/reliability/replica-pair.mjs';
import { sample } from '../../test/support/harness.js';

const BATCH = 100;
const SEED_REQUESTS = 200;
const ROUND_REQUESTS = 300;
const INGEST_CONNECTIONS = 8;
const READERS = 4;
const PAGE = 100;
const ROUNDS = 2;
const FAILOVER_WINDOW_MS = 3_000;

const RELAXED = { READ_MAX_CONCURRENT_PER_KEY: '1000', READ_TIME_MS_PER_SECOND: '1000000' };

async function routeOf(server) {
  const text = await (await fetch(`${server.base}/metrics`)).text();
  return sample(text, 'tally_read_route', { target: 'replica' }) === 1 ? 'replica' : 'primary';
}

/** Reads in `READERS` loops until `stop()`; each answer with its start and end (epoch ms). */
function readers(server, tenant) {
  const answers = [];
  let running = true;
  const url = `${server.base}/api/v1/events?appId=${tenant.appId}&limit=${PAGE}`;
  const headers = { Authorization: `Bearer ${tenant.apiKey}` };
  const loops = Array.from({ length: READERS }, async () => {
    while (running) {
      const start = Date.now();
      const t0 = performance.now();
      let status;
      try {
        const res = await fetch(url, { headers, signal: AbortSignal.timeout(10_000) });
        await res.arrayBuffer();
        status = res.status;
      } catch (err) {
        status = String(err?.cause?.code ?? err?.name);
      }
      answers.push({ start, end: Date.now(), ms: performance.now() - t0, status });
    }
  });
  return {
    answers,
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

function ingestLoad(server, tenant, requests) {
  const template = batchTemplate(31, BATCH);
  const run = randomUUID().slice(0, 8);
  return runLoad({
    url: `${server.base}/api/ingest`,
    method: 'POST',
    headers: { Authorization: `Bearer ${tenant.ingestKey}`, 'Content-Type': 'application/json' },
    body: (i) => template.render(`${run}-${i}`),
    connections: INGEST_CONNECTIONS,
    amount: requests,
    count: true,
    maxSeconds: 120,
  });
}

/** One round: ingest load and readers together on `server`. */
async function round(server, tenant, readsOn) {
  const reads = readers(server, tenant);
  const ingest = await ingestLoad(server, tenant, ROUND_REQUESTS);
  await reads.stop();
  const ok = reads.answers.filter((a) => a.status === 200);
  return {
    readsOn,
    ingestEventsPerSec: Math.round(ingest.eventsPerSec),
    ingestP99Ms: ingest.latencyMs.p99,
    ingestNon2xx: ingest.non2xx,
    eventsPage: percentiles(ok.map((a) => a.ms)),
    readErrors: reads.answers.length - ok.length,
  };
}

async function failover(server, pair, tenant) {
  const reads = readers(server, tenant);
  await sleep(1_000);
  const stoppedAt = Date.now();
  await pair.standby.stop();
  await sleep(FAILOVER_WINDOW_MS);
  await reads.stop();
  const switchedAt = switchedToPrimaryAt(server.output(), stoppedAt);
  const window = reads.answers.filter((a) => a.end >= stoppedAt);
  const firstOnPrimary = switchedAt
    ? Math.min(...window.filter((a) => a.start >= switchedAt && a.status === 200).map((a) => a.end))
    : null;
  return {
    switchToPrimaryMs: switchedAt === null ? null : switchedAt - stoppedAt,
    firstReadAnsweredByPrimaryMs: Number.isFinite(firstOnPrimary) ? firstOnPrimary - stoppedAt : null,
    readsInWindow: window.length,
    inFlightAtStop: reads.answers.filter((a) => a.start < stoppedAt && a.end >= stoppedAt).length,
    serverErrors: window.filter((a) => typeof a.status === 'number' && a.status >= 500).length,
    otherFailures: window.filter((a) => typeof a.status !== 'number' || (a.status !== 200 && a.status < 500))
      .length,
    windowMs: FAILOVER_WINDOW_MS,
  };
}

function mean(rounds, pick) {
  return Math.round(rounds.reduce((n, r) => n + pick(r), 0) / rounds.length);
}

async function measure(log) {
  const loadBefore = os.loadavg()[0];
  const pair = await startReplicaPair('bench-replica');
  const servers = [];
  try {
    const onReplica = await startServer({
      databaseUrl: pair.primary.url,
      port: await freePort(),
      env: { ...RELAXED, DATABASE_READ_URL: pair.standby.url, LOG_LEVEL: 'warn', ROLLUPS_ENABLED: 'false' },
    });
    servers.push(onReplica);
    const onPrimary = await startServer({
      databaseUrl: pair.primary.url,
      port: await freePort(),
      env: { ...RELAXED, LOG_LEVEL: 'warn', ROLLUPS_ENABLED: 'false' },
    });
    servers.push(onPrimary);
    const tenant = await makeTenant(pair.primary.url, 'bench-replica');
    log(`seeding ${SEED_REQUESTS * BATCH} events`);
    await ingestLoad(onPrimary, tenant, SEED_REQUESTS);
    await pair.standby.caughtUp();
    // Warm both sides' caches with the pages the rounds read, so that round 1 is not a cold read.
    for (const server of servers) {
      const warm = readers(server, tenant);
      await sleep(2_000);
      await warm.stop();
    }
    const rounds = [];
    for (let i = 0; i < ROUNDS; i++) {
      for (const [server, readsOn] of [
        [onReplica, 'replica'],
        [onPrimary, 'primary'],
      ]) {
        const route = await routeOf(server);
        if (readsOn === 'replica' && route !== 'replica') throw new Error('reads are not on the standby');
        const r = await round(server, tenant, readsOn);
        log(
          `round ${i + 1}, reads on the ${readsOn}: ingest ${r.ingestEventsPerSec} events/s, events page p50 ${r.eventsPage.p50} ms p99 ${r.eventsPage.p99} ms (${r.eventsPage.n} reads)`,
        );
        rounds.push(r);
      }
    }
    const on = (target) => rounds.filter((r) => r.readsOn === target);
    const summary = (target) => ({
      ingestEventsPerSec: mean(on(target), (r) => r.ingestEventsPerSec),
      eventsPageP50Ms: mean(on(target), (r) => r.eventsPage.p50),
      eventsPageP99Ms: mean(on(target), (r) => r.eventsPage.p99),
    });
    const stop = await failover(onReplica, pair, tenant);
    log(
      `standby stopped: reads on the primary after ${stop.switchToPrimaryMs} ms, first read answered there after ${stop.firstReadAnsweredByPrimaryMs} ms, ${stop.serverErrors} 5xx`,
    );
    return {
      timestamp: new Date().toISOString(),
      loadAverage: { before: loadBefore, after: os.loadavg()[0] },
      conditions:
        `primary and standby on this machine (${os.cpus().length} cores, shared with other work: load ` +
        `${loadBefore.toFixed(1)} → ${os.loadavg()[0].toFixed(1)}); ${ROUNDS} alternating rounds of ` +
        `${ROUND_REQUESTS} × ${BATCH}-event batches at ${INGEST_CONNECTIONS} connections with ${READERS} ` +
        `readers of ${PAGE}-event pages, after ${SEED_REQUESTS * BATCH} seeded events. Indicative only.`,
      readsOnReplica: summary('replica'),
      readsOnPrimary: summary('primary'),
      rounds,
      failover: stop,
      targets: [
        {
          name: 'failover ≤ 2 s',
          pass: stop.firstReadAnsweredByPrimaryMs !== null && stop.firstReadAnsweredByPrimaryMs <= 2_000,
        },
        { name: 'no 5xx when the standby stops', pass: stop.serverErrors === 0 },
      ],
    };
  } finally {
    for (const server of servers) await server.kill('SIGTERM');
    await pair.destroy();
  }
}

/** Measures, prints, and records the `replica` section of latest.json. */
export async function replicaBenchmarkMain({ root, log, git }) {
  const replica = { commit: git(['rev-parse', 'HEAD']), ...(await measure(log)) };
  const file = path.join(root, 'bench', 'results', 'latest.json');
  let results = { schema: 1 };
  try {
    results = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    /* no full run recorded yet */
  }
  results.replica = replica;
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(results, null, 2) + '\n');
  const { readsOnReplica: r, readsOnPrimary: p } = replica;
  process.stdout.write(
    [
      'Reads on a hot standby (same machine):',
      `  reads on the replica: ingest ${r.ingestEventsPerSec} events/s, events page p50 ${r.eventsPageP50Ms} ms, p99 ${r.eventsPageP99Ms} ms`,
      `  reads on the primary: ingest ${p.ingestEventsPerSec} events/s, events page p50 ${p.eventsPageP50Ms} ms, p99 ${p.eventsPageP99Ms} ms`,
      `  standby stopped: first read answered by the primary after ${replica.failover.firstReadAnsweredByPrimaryMs} ms, ${replica.failover.serverErrors} 5xx`,
      ...replica.targets.map((t) => `  target ${t.name}: ${t.pass ? 'pass' : 'FAIL'}`),
      `\nResults: ${path.relative(root, file)} (section "replica")`,
    ].join('\n') + '\n',
  );
  return replica.targets.every((t) => t.pass) ? 0 : 1;
}
