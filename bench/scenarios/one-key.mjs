// One key alone: `npm run bench -- --one-key [--quick]`, the `oneKey` section of
// bench/results/latest.json (quick.json with --quick).
//
// The common deployment is one server-side relay with one ingest key. In one run, on one embedded
// PostgreSQL:
//  1. closed loop: that key sends 100-event batches on 64 connections and resends a refused batch
//     at once (no wait for Retry-After), against servers with three sets of limits:
//     - `lifted`: every limit out of reach, ingest scheduling included;
//     - `defaults`: ingest CPU scheduling at the product's defaults (INGEST_CPU_MS_PER_SECOND), the
//       per-key request and event rates raised as in the other runs;
//     - `productDefaults`: every limit at its default, the per-key rates included (100 requests a
//       second cap one key at 10,000 events/s of 100-event batches, by design). Reported, not a target.
//     A full run measures lifted and defaults twice (ABBA) and keeps each one's better run.
//     Then the database ceiling: the service's own unnest statement from 4 connections.
//  2. open loop against the last `defaults` server: fixed arrival rates of 50 %, 80 % and 95 % of
//     the best `defaults` peak, latency from each request's intended send time.
//  3. the targets beside the figures, each with a pass flag. The mode always exits 0: the figures
//     are a record, not a gate (and the machine may be shared).
import fs from 'node:fs';
import autocannon from 'autocannon';
import os from 'node:os';
import path from 'node:path';
import { clusterDir, stop as stopCluster } from '../../src/database/embedded-pg.mjs';
import { ROOT, BENCH, QUICK, log, git, snapshotDist, startCluster } from '../lib/common.mjs';
import { connect, countEvents, dbCeiling, insertApps, recreateDatabase, withDatabase } from '../lib/db.mjs';
import { batchTemplate } from '../lib/events.mjs';
import { openLoop, tailOf } from '../lib/open-loop.mjs';
import {
  clusterCpuSeconds,
  cpuSecondsOf,
  ingestHeaders,
  makeTenant,
  startServer,
} from '../lib/processes.mjs';
import { loadWritePath } from '../lib/write-path.mjs';

const BATCH = 100;
const CONNECTIONS = 64;
const OPEN_LOOP_SHARES = [0.5, 0.8, 0.95];
const PHASE = QUICK
  ? { closedSeconds: 2, warmupSeconds: 1, ceilingSeconds: 1, openSeconds: 2, drainMs: 10_000 }
  : { closedSeconds: 15, warmupSeconds: 3, ceilingSeconds: 10, openSeconds: 20, drainMs: 30_000 };

export const TARGETS = {
  defaultsVsLifted: { min: 0.95 },
  refusedShare: { max: 0.01 },
  defaultsVsCeiling: { min: 0.9 },
  openLoop80: { maxP99Ms: 50, maxP999Ms: 150 },
  cpuUsPerEvent: { max: 30 },
};

// Values for the limits that startServer raises out of reach; an empty value is the product's default.
const SCHEDULING_DEFAULTS = { INGEST_CPU_MS_PER_SECOND: '' };
const CONFIGS = {
  lifted: { INGEST_CPU_MS_PER_SECOND: '1000000' },
  defaults: SCHEDULING_DEFAULTS,
  productDefaults: {
    ...SCHEDULING_DEFAULTS,
    INGEST_RATE_REQUESTS: '',
    INGEST_RATE_EVENTS: '',
    READ_RATE_REQUESTS: '',
    READ_MAX_CONCURRENT_PER_KEY: '',
    READ_TIME_MS_PER_SECOND: '',
    AUTH_FAILURE_LIMIT: '',
  },
};

/** Unique bodies: 32 seeded templates, each request's eventIds tagged with the run and its index. */
function bodies(name) {
  const templates = Array.from({ length: 32 }, (_, i) => batchTemplate(4200 + i, BATCH));
  const runId = `${name}-${Date.now().toString(36)}`;
  return (i) => templates[i % templates.length].render(`${runId}.${i.toString(36)}`);
}

/** CPU seconds so far of the server, the PostgreSQL cluster and this process (the load generator). */
function machineCpu(server, pgData) {
  const own = process.cpuUsage();
  return {
    server: cpuSecondsOf(server.pid),
    postgres: clusterCpuSeconds(pgData),
    loadGenerator: (own.user + own.system) / 1e6,
  };
}

/** CPU µs per accepted event, by process and in all, between two machineCpu readings. */
function cpuPerEvent(before, after, events) {
  const us = (k) => Math.round(((after[k] - before[k]) / Math.max(1, events)) * 1e7) / 10;
  const out = { server: us('server'), postgres: us('postgres'), loadGenerator: us('loadGenerator') };
  out.total = Math.round((out.server + out.postgres + out.loadGenerator) * 10) / 10;
  return out;
}

/** Sums what ingest's 200 answers say; a count of unreadable bodies beside. */
function acceptedCounter() {
  const totals = { received: 0, accepted: 0, duplicates: 0, rejected: 0, unreadable: 0 };
  const add = (status, text) => {
    if (status !== 200) return;
    try {
      const r = JSON.parse(text);
      for (const k of ['received', 'accepted', 'duplicates', 'rejected']) totals[k] += r[k] ?? 0;
    } catch {
      totals.unreadable++;
    }
  };
  return { totals, add };
}

/**
 * The closed loop: `amount` requests on 64 connections; a refused batch goes back to the front of
 * the line and the next free connection sends it again at once.
 */
async function closedLoop({ server, tenant, pgData, name, amount }) {
  const render = bodies(name);
  const resend = [];
  const counter = acceptedCounter();
  let next = 0;
  const request = {
    setupRequest(req, context) {
      context.body = resend.pop() ?? render(next++);
      req.body = context.body;
      return req;
    },
    onResponse(status, text, context) {
      if (status === 429) resend.push(context.body);
      counter.add(status, text);
    },
  };
  const before = machineCpu(server, pgData);
  const started = process.hrtime.bigint();
  const instance = autocannon({
    url: `${server.baseUrl}/api/ingest`,
    method: 'POST',
    headers: ingestHeaders(tenant.ingestKey),
    connections: Math.min(CONNECTIONS, amount),
    amount,
    timeout: 30,
    sampleInt: 100,
    requests: [request],
  });
  // A safety stop: a run that hangs is cut off and marked.
  let stoppedEarly = false;
  const watchdog = setTimeout(
    () => {
      stoppedEarly = true;
      instance.stop();
    },
    (PHASE.closedSeconds * 4 + 30) * 1000,
  );
  const raw = await instance;
  clearTimeout(watchdog);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const after = machineCpu(server, pgData);
  const statusCodes = Object.fromEntries(
    Object.entries(raw.statusCodeStats ?? {}).map(([k, v]) => [k, Number(v.count)]),
  );
  const refused = statusCodes['429'] ?? 0;
  const answered = Object.values(statusCodes).reduce((n, c) => n + c, 0);
  return {
    requests: answered,
    refused,
    refusedShare: answered ? refused / answered : null,
    statusCodes,
    errors: raw.errors,
    timeouts: raw.timeouts,
    stoppedEarly,
    seconds,
    requestsPerSec: answered / seconds,
    eventsPerSec: counter.totals.accepted / seconds,
    totals: counter.totals,
    // autocannon's latency of every answer, refusals included.
    latencyMs: { p50: raw.latency.p50, p99: raw.latency.p99, max: raw.latency.max },
    cpuUsPerEvent: cpuPerEvent(before, after, counter.totals.accepted),
  };
}

/** One server with `env`: a warm-up that sizes the run, then the measured closed loop. */
async function closedLoopConfig({ dist, url, pgData, name, env, afterClosed }) {
  const server = await startServer({ dist, databaseUrl: url, env });
  try {
    const tenant = await makeTenant(dist, url, `one-key-${name}-${Date.now().toString(36)}`);
    const warm = await closedLoop({ server, tenant, pgData, name: `${name}-warm`, amount: 2 * CONNECTIONS });
    const warm2 = await closedLoop({
      server,
      tenant,
      pgData,
      name: `${name}-warm2`,
      amount: Math.max(2 * CONNECTIONS, Math.round(warm.requestsPerSec * PHASE.warmupSeconds)),
    });
    const amount = Math.max(3 * CONNECTIONS, Math.round(warm2.requestsPerSec * PHASE.closedSeconds));
    const db = await connect(url);
    const rowsBefore = await countEvents(db, tenant.appId);
    const result = await closedLoop({ server, tenant, pgData, name, amount });
    result.rowsStoredEqualAccepted =
      (await countEvents(db, tenant.appId)) - rowsBefore === result.totals.accepted;
    await db.end();
    log(
      `one key, ${name}: ${Math.round(result.eventsPerSec)} events/s, ${result.refused} of ${result.requests} ` +
        `refused, p50 ${result.latencyMs.p50} ms, p99 ${result.latencyMs.p99} ms, ${result.cpuUsPerEvent.total} µs/event`,
    );
    const extra = afterClosed ? await afterClosed({ server, tenant, closed: result }) : undefined;
    return { result, extra };
  } finally {
    await server.stop();
  }
}

/** The open loop at each share of `peakEventsPerSec`, against the running `server`. */
async function openLoopLevels({ server, tenant, pgData, peakEventsPerSec }) {
  const levels = {};
  for (const share of OPEN_LOOP_SHARES) {
    const ratePerSec = Math.max(1, (peakEventsPerSec * share) / BATCH);
    const counter = acceptedCounter();
    const before = machineCpu(server, pgData);
    const run = await openLoop({
      url: `${server.baseUrl}/api/ingest`,
      headers: ingestHeaders(tenant.ingestKey),
      body: bodies(`open-${share}`),
      ratePerSec,
      seconds: PHASE.openSeconds,
      drainMs: PHASE.drainMs,
      onAnswer: counter.add,
    });
    const after = machineCpu(server, pgData);
    const { latenciesByStatus, ...rest } = run;
    const all = Object.values(latenciesByStatus).flat();
    const statuses = Object.fromEntries(Object.entries(latenciesByStatus).map(([k, v]) => [k, v.length]));
    const level = {
      shareOfPeak: share,
      ...rest,
      statuses,
      refused: statuses['429'] ?? 0,
      eventsPerSec: counter.totals.accepted / run.seconds,
      // From the intended send time: of the accepted batches, and of every request (refusals,
      // errors and requests unanswered at the cut-off included).
      latencyMs: tailOf(latenciesByStatus['200'] ?? []),
      latencyAllMs: tailOf(all),
      cpuUsPerEvent: cpuPerEvent(before, after, counter.totals.accepted),
    };
    levels[`p${Math.round(share * 100)}`] = level;
    log(
      `open loop at ${share * 100} % (${ratePerSec.toFixed(1)} requests/s): achieved ` +
        `${level.achievedRatePerSec?.toFixed(1)}/s, p50 ${level.latencyMs.p50} ms, p99 ${level.latencyMs.p99} ms, ` +
        `p99.9 ${level.latencyMs.p999} ms, refused ${level.refused}, unanswered ${level.unanswered}, ` +
        `send lag p99 ${level.sendLagMs.p99} ms, at most ${level.maxInFlight} in flight`,
    );
  }
  return levels;
}

/** The service's unnest statement from 4 connections, at 100- and 1,000-row statements; the higher counts. */
async function ceiling({ dist, url }) {
  const write = loadWritePath(dist);
  if (!write) throw new Error('no IngestRepository in the build: run `npm run build`');
  const db = await connect(url);
  try {
    const [appId] = await insertApps(db, 1, `one-key-ceiling-${Date.now().toString(36)}`);
    const runs = [];
    for (const batchSize of [100, 1000]) {
      const seconds = PHASE.ceilingSeconds / 2;
      const { latencies: _latencies, ...run } = await dbCeiling({
        url,
        appId,
        connections: 4,
        seconds,
        batchSize,
        write,
      });
      runs.push(run);
      log(`db ceiling, ${batchSize}-row statements: ${Math.round(run.rowsPerSec)} rows/s`);
    }
    const best = runs.reduce((a, b) => (b.rowsPerSec > a.rowsPerSec ? b : a));
    return { rowsPerSec: best.rowsPerSec, batchSize: best.batchSize, connections: 4, runs };
  } finally {
    await db.end();
  }
}

const ratio = (a, b) => (Number.isFinite(a) && b ? a / b : null);

/** The acceptance targets beside the figures, each with its pass flag. */
export function evaluate({ closedLoop: closed, ceiling: ceil, openLoop: open }) {
  const d = closed.defaults;
  const at80 = open.p80;
  const defaultsVsLifted = ratio(d.eventsPerSec, closed.lifted.eventsPerSec);
  const defaultsVsCeiling = ratio(d.eventsPerSec, ceil.rowsPerSec);
  const t = TARGETS;
  return {
    defaultsVsLifted: {
      value: defaultsVsLifted,
      ...t.defaultsVsLifted,
      pass: defaultsVsLifted >= t.defaultsVsLifted.min,
    },
    refusedShare: { value: d.refusedShare, ...t.refusedShare, pass: d.refusedShare <= t.refusedShare.max },
    defaultsVsCeiling: {
      value: defaultsVsCeiling,
      ...t.defaultsVsCeiling,
      pass: defaultsVsCeiling >= t.defaultsVsCeiling.min,
    },
    openLoop80P99: {
      value: at80.latencyMs.p99,
      max: t.openLoop80.maxP99Ms,
      pass:
        at80.latencyMs.p99 !== null && at80.latencyMs.p99 <= t.openLoop80.maxP99Ms && at80.unanswered === 0,
    },
    openLoop80P999: {
      value: at80.latencyMs.p999,
      max: t.openLoop80.maxP999Ms,
      pass:
        at80.latencyMs.p999 !== null &&
        at80.latencyMs.p999 <= t.openLoop80.maxP999Ms &&
        at80.unanswered === 0,
    },
    cpuUsPerEvent: {
      value: d.cpuUsPerEvent.total,
      ...t.cpuUsPerEvent,
      pass: d.cpuUsPerEvent.total <= t.cpuUsPerEvent.max,
    },
  };
}

function summary(section, file) {
  const c = section.closedLoop;
  const row = (name, r) =>
    `  ${name.padEnd(16)} ${String(Math.round(r.eventsPerSec)).padStart(7)} events/s, ` +
    `${(r.refusedShare * 100).toFixed(1)} % refused (${r.refused} of ${r.requests}), ` +
    `p50 ${r.latencyMs.p50} ms, p99 ${r.latencyMs.p99} ms, ${r.cpuUsPerEvent.total} µs/event`;
  const open = Object.values(section.openLoop).map(
    (l) =>
      `  ${String(l.shareOfPeak * 100).padStart(3)} % of peak: ${l.achievedRatePerSec?.toFixed(1)} of ` +
      `${l.intendedRatePerSec.toFixed(1)} requests/s, p50 ${l.latencyMs.p50} ms, p99 ${l.latencyMs.p99} ms, ` +
      `p99.9 ${l.latencyMs.p999} ms, refused ${l.refused}, unanswered ${l.unanswered}, ` +
      `send lag p99 ${l.sendLagMs.p99} ms`,
  );
  const fmt = (v) => (typeof v === 'number' ? (Math.abs(v) < 10 ? v.toFixed(3) : v.toFixed(1)) : String(v));
  const targets = Object.entries(section.targets).map(
    ([k, t]) =>
      `  ${k.padEnd(18)} ${fmt(t.value).padStart(8)}  (${t.min !== undefined ? '≥ ' + t.min : '≤ ' + t.max})  ${t.pass ? 'pass' : 'FAIL'}`,
  );
  return [
    `One key, ${BATCH}-event batches, ${CONNECTIONS} connections, closed loop (load average ${section.loadAverage.start.toFixed(2)} at the start):`,
    row('lifted', c.lifted),
    row('defaults', c.defaults),
    row('productDefaults', c.productDefaults),
    `  db ceiling       ${Math.round(section.ceiling.rowsPerSec)} rows/s (unnest, 4 connections)`,
    `Open loop against defaults (latency from the intended send time, accepted batches):`,
    ...open,
    'Targets:',
    ...targets,
    `\nResults: ${path.relative(ROOT, file)} (oneKey)`,
  ].join('\n');
}

// Runs one after the other on this machine differ by up to a quarter, so the full run measures
// lifted and defaults twice, in the order ABBA, and keeps each one's better run; every run is in
// `closedLoopRounds`.
const ROUNDS = QUICK
  ? [['lifted', 'defaults']]
  : [
      ['lifted', 'defaults'],
      ['defaults', 'lifted'],
    ];

const best = (runs) => runs.reduce((a, b) => (b.eventsPerSec > a.eventsPerSec ? b : a));

/** Closed loops in ABBA order; the open loop on the last defaults server, at the best defaults peak. */
async function closedRounds({ dist, url, pgData }) {
  const runs = { lifted: [], defaults: [] };
  let openLoop;
  for (const [round, order] of ROUNDS.entries()) {
    for (const name of order) {
      const last = round === ROUNDS.length - 1 && name === 'defaults';
      log(`one key, round ${round + 1}: ${name}${last ? ', then the open loop' : ''}`);
      const peak = (closed) => Math.max(closed.eventsPerSec, ...runs.defaults.map((r) => r.eventsPerSec));
      const { result, extra } = await closedLoopConfig({
        dist,
        url,
        pgData,
        name,
        env: CONFIGS[name],
        afterClosed: last
          ? ({ server, tenant, closed }) =>
              openLoopLevels({ server, tenant, pgData, peakEventsPerSec: peak(closed) })
          : undefined,
      });
      runs[name].push(result);
      if (last) openLoop = extra;
    }
  }
  return { runs, openLoop };
}

async function measure({ dist, cluster }) {
  const url = withDatabase(cluster.url, 'bench_one_key');
  await recreateDatabase(cluster.url, 'bench_one_key');
  const pgData = path.join(await clusterDir(cluster.dir), 'pg');
  const { runs, openLoop } = await closedRounds({ dist, url, pgData });
  const closed = { lifted: best(runs.lifted), defaults: best(runs.defaults) };
  log('one key: every limit at its default');
  closed.productDefaults = (
    await closedLoopConfig({ dist, url, pgData, name: 'productDefaults', env: CONFIGS.productDefaults })
  ).result;
  log('one key: database ceiling');
  const ceil = await ceiling({ dist, url });
  return { closedLoop: closed, closedLoopRounds: runs, openLoop, ceiling: ceil };
}

/** `npm run bench -- --one-key`: writes the `oneKey` section; always resolves with 0. */
export async function oneKeyMain() {
  const loadStart = os.loadavg()[0];
  const dist = await snapshotDist();
  const cluster = await startCluster();
  let figures;
  try {
    figures = await measure({ dist, cluster });
  } finally {
    await stopCluster(cluster.dir).catch(() => undefined);
    if (cluster.temporary) fs.rmSync(cluster.dir, { recursive: true, force: true });
    fs.rmSync(dist, { recursive: true, force: true });
  }
  const c = figures.closedLoop;
  const section = {
    timestamp: new Date().toISOString(),
    quick: QUICK,
    commit: git(['rev-parse', 'HEAD']),
    cores: os.cpus().length,
    loadAverage: { start: loadStart, end: os.loadavg()[0] },
    note: 'Server, PostgreSQL and load generator share the same cores; on a machine shared with other work the figures are indicative.',
    setup: { batch: BATCH, connections: CONNECTIONS, secondsPerPhase: PHASE, limits: CONFIGS },
    ...figures,
    ratios: {
      defaultsVsLifted: ratio(c.defaults.eventsPerSec, c.lifted.eventsPerSec),
      defaultsVsCeiling: ratio(c.defaults.eventsPerSec, figures.ceiling.rowsPerSec),
      liftedVsCeiling: ratio(c.lifted.eventsPerSec, figures.ceiling.rowsPerSec),
      productDefaultsVsLifted: ratio(c.productDefaults.eventsPerSec, c.lifted.eventsPerSec),
    },
  };
  section.targets = evaluate(section);
  const file = path.join(BENCH, 'results', QUICK ? 'quick.json' : 'latest.json');
  const results = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : {};
  results.oneKey = section;
  fs.writeFileSync(file, JSON.stringify(results, null, 2) + '\n');
  process.stdout.write(summary(section, file) + '\n');
  return 0;
}
