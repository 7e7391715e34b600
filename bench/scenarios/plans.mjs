/* global fetch, performance */
// Tracking plans (`npm run bench -- --plans`): what a plan costs ingest, and how fast a replay runs.
// Writes the `plans` section of bench/results/latest.json and nothing else.
//
//  - ingest with a 50-event plan (10 payload properties each, mode enforce, every event passing)
//    against the same load for an app without a plan, measured as a pair on one server: many
//    rounds, the two sides alternating (and which goes first), each side's server CPU per event
//    read to the nanosecond from the scheduler. The plan's cost is the median of the per-round
//    differences: a round that another process on the machine slowed moves one difference, not
//    the figure. Rounds of 50,000 events: the server has a periodic cost of its own (about 0.1 s
//    of CPU every second or so) that falls on one side or the other, and shorter rounds make the
//    differences swing by ±5 µs around it. The server is first run past the point where V8 has
//    optimised the plan's 50 compiled validators (some 10^6 events), as a server that runs a
//    plan is.
//  - the plan's layers in-process, on the built code: the gate (lookup, validator, counters) run
//    after ingest's field rules on each event, as ingest runs it, and the settling of a request
//    (data-quality counts, metrics), per event of 100-event batches parsed from JSON, as paired
//    rounds against the parse and the field rules alone.
//  - the cost with no plan: the per-request plan lookup (a cache hit answering "none") and the
//    per-event null check, timed in-process on the built code, per event of a 100-event batch.
//  - replay throughput: events quarantined under a rejecting plan, the plan fixed, then one
//    POST /api/v1/quarantine/replay timed end to end.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { stop as stopCluster } from '../../src/database/embedded-pg.mjs';
import { connect, recreateDatabase, withDatabase } from '../lib/db.mjs';
import { runLoad } from '../lib/load.mjs';
import { cli, preciseCpuSecondsOf, startServer } from '../lib/processes.mjs';
import {
  ROOT,
  QUICK,
  flags,
  log,
  ingestHeaders,
  makeTenant,
  snapshotDist,
  startCluster,
} from '../lib/common.mjs';

const SIZES = QUICK
  ? { requests: 60, rounds: 4, batch: 100, connections: 8, replay: 2_000, warmEvents: 0 }
  : { requests: 500, rounds: 16, batch: 100, connections: 16, replay: 20_000, warmEvents: 2_000_000 };
const EVENTS = 50;
const PROPS = 10;

function definition(e) {
  const properties = {};
  for (let p = 0; p < PROPS; p++) {
    if (p % 3 === 0) properties[`p${p}`] = { type: 'string', enum: ['a', 'b', 'c', `v${e}`] };
    else if (p % 3 === 1) properties[`p${p}`] = { type: 'integer', minimum: 0, maximum: 1_000_000 };
    else properties[`p${p}`] = { type: 'string', maxLength: 64, pattern: '^[a-z0-9-]+$' };
  }
  return {
    floatValue: 'optional',
    payload: { type: 'object', required: ['p0', 'p1'], additionalProperties: false, properties },
  };
}

export function benchPlan(mode = 'enforce') {
  const events = {};
  for (let e = 0; e < EVENTS; e++) events[`Plan.e${e}`] = definition(e);
  return { mode, unplanned: 'reject', events };
}

function payload(i) {
  const out = {};
  for (let p = 0; p < PROPS; p++)
    out[`p${p}`] = p % 3 === 0 ? 'b' : p % 3 === 1 ? (i * 7 + p) % 1000 : `id-${i % 97}`;
  return out;
}

function body(runId, i, batch) {
  const events = [];
  for (let k = 0; k < batch; k++) {
    const n = i * batch + k;
    events.push({
      eventName: `Plan.e${n % EVENTS}`,
      eventId: `${runId}.${n}`,
      anonymousUserId: `u${n % 500}`,
      payload: payload(n),
    });
  }
  return JSON.stringify({ events });
}

async function api(server, key, method, pathname, json, headers = {}) {
  const res = await fetch(server.baseUrl + pathname, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: json === undefined ? undefined : JSON.stringify(json),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${pathname}: ${res.status} ${text}`);
  return { body: JSON.parse(text), etag: res.headers.get('etag') };
}

async function putPlan(server, key, appId, plan) {
  const current = await api(server, key, 'GET', `/api/v1/plan?appId=${appId}`);
  await api(server, key, 'PUT', `/api/v1/plan?appId=${appId}`, plan, { 'if-match': current.etag });
}

async function loadRun(server, tenant, name, requests = SIZES.requests) {
  const runId = `${name}-${Date.now().toString(36)}`;
  const bodies = Array.from({ length: requests }, (_, i) => body(runId, i, SIZES.batch));
  const cpuBefore = preciseCpuSecondsOf(server.pid);
  const r = await runLoad({
    url: `${server.baseUrl}/api/ingest`,
    method: 'POST',
    headers: ingestHeaders(tenant.ingestKey),
    // A function, not the array: autocannon replays an array's requests from the start on every
    // connection, which would send the same eventIds again.
    body: (i) => bodies[i],
    connections: SIZES.connections,
    amount: requests,
    count: true,
    // End at the last answer, not at the next whole second: the rate of a short round is exact.
    sampleMs: 20,
  });
  const cpu = preciseCpuSecondsOf(server.pid) - cpuBefore;
  const accepted = r.totals.accepted;
  if (accepted !== requests * SIZES.batch)
    throw new Error(`${name}: ${accepted} accepted of ${requests * SIZES.batch}`);
  return { eventsPerSec: Math.round(r.eventsPerSec), serverCpuUsPerEvent: (cpu / accepted) * 1e6 };
}

/** The no-plan path in-process: the gate lookup of a request, per event of a 100-event batch. */
async function noPlanCost(dist) {
  const require = createRequire(import.meta.url);
  const { PlansService } = require(path.join(dist, 'src/plans/plans.service.js'));
  // The audit log is not reached by a lookup.
  const service = new PlansService({ current: async () => null, currentVersion: async () => 0 }, {});
  const sink = { rejectLater() {}, warnLater() {} };
  await service.gate('app', sink);
  const n = 200_000;
  const started = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    const gate = await service.gate('app', sink);
    // The per-event check of ingest's loop, for a 100-event batch.
    for (let k = 0; k < 100; k++) if (gate !== null) throw new Error('a plan appeared');
  }
  const ns = Number(process.hrtime.bigint() - started) / n;
  return { perRequestNs: Math.round(ns), perEventUs: ns / 100 / 1000 };
}

const median = (xs) => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};
const quartiles = (xs) => {
  const sorted = [...xs].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return [at(0.25), at(0.75)];
};

/**
 * The plan's layers in-process, on the built code, in CPU time: 100-event batches parsed from
 * JSON (fresh objects, as ingest gets them) and checked by ingest's field rules, then (a) nothing
 * more, (b) the gate of the 50-event enforced plan on each event after its field rules, as ingest
 * interleaves them, (c) that and the request's settling: the data-quality counts and the
 * violation metrics. Paired rounds in turn; medians of the differences, per event.
 */
function planLayersInProcess(dist) {
  const require = createRequire(import.meta.url);
  const { compilePlan } = require(path.join(dist, 'src/plans/plan-compiler.js'));
  const { PlanGate } = require(path.join(dist, 'src/plans/plan-gate.js'));
  const { QualityService } = require(path.join(dist, 'src/plans/quality.service.js'));
  const { EventValidator } = require(path.join(dist, 'src/ingest/event-validator.js'));
  const compiled = compilePlan(benchPlan('enforce'), 1);
  if (!compiled.ok) throw new Error(JSON.stringify(compiled.problems));
  const plan = compiled.compiled;
  // Its repository is not reached: the counts are only flushed on a timer, not started here.
  const quality = new QualityService({});
  const counted = { schema_violation: 0, unplanned_event: 0 };
  const sink = { rejectLater() {}, warnLater() {} };
  const bodies = Array.from({ length: 200 }, (_, i) => body('inproc', i, 100));
  const now = Date.now();
  const run = (requests, layer) => {
    const started = process.cpuUsage();
    for (let r = 0; r < requests; r++) {
      const { events } = JSON.parse(bodies[r % bodies.length]);
      const fields = new EventValidator({
        receivedAt: now,
        skewMs: 0,
        oldestTs: now - 86_400_000,
        maxEventBytes: 32_768,
        piiPolicy: 'redact',
        forceTestMode: false,
        pseudonymise: (_kind, value) => value,
        maxIssuesListed: 100,
        suppressed: null,
      });
      const gate = layer === 'fields' ? null : new PlanGate(plan, sink);
      for (let i = 0; i < events.length; i++) {
        const event = fields.validate(events[i], i);
        if (event === null || (gate !== null && !gate.admit(event))) throw new Error('rejected');
      }
      if (gate === null) continue;
      if (layer === 'settle') {
        quality.add('app', now, gate);
        for (const code in gate.violations) counted[code] += gate.violations[code];
      }
    }
    const used = process.cpuUsage(started);
    return (used.user + used.system) / (requests * 100);
  };
  // 50 compiled validators reach V8's optimising tier only after some 10^6 events in all (about
  // 3 µs per event before, a fraction of one after): the steady state is what a server runs.
  const warmRequests = QUICK ? 1_000 : 25_000;
  const warm = Date.now();
  for (let n = 0; n < warmRequests; n += 500) run(500, 'settle');
  const warmSeconds = (Date.now() - warm) / 1000;
  const gate = [];
  const settle = [];
  for (let round = 0; round < 15; round++) {
    const parse = run(2000, 'fields');
    const withGate = run(2000, 'gate');
    const withSettle = run(2000, 'settle');
    gate.push(withGate - parse);
    settle.push(withSettle - withGate);
  }
  return {
    gateUsPerEvent: median(gate),
    settleUsPerEvent: median(settle),
    warmUpEvents: warmRequests * 100,
    warmUpSeconds: warmSeconds,
  };
}

async function replayRun(server, tenant, apiKey) {
  // Quarantine: a plan that rejects every event (no definitions, unplanned rejected).
  await putPlan(server, apiKey, tenant.appId, { mode: 'enforce', unplanned: 'reject', events: {} });
  const runId = `replay-${Date.now().toString(36)}`;
  const requests = SIZES.replay / 500;
  const bodies = Array.from({ length: requests }, (_, i) => body(runId, i, 500));
  const r = await runLoad({
    url: `${server.baseUrl}/api/ingest`,
    method: 'POST',
    headers: ingestHeaders(tenant.ingestKey),
    body: (i) => bodies[i],
    connections: 4,
    amount: requests,
    count: true,
  });
  if (r.totals.rejected !== SIZES.replay) throw new Error(`replay setup: ${r.totals.rejected} quarantined`);
  await putPlan(server, apiKey, tenant.appId, benchPlan('enforce'));
  // The new version's first use compiles it (once per instance); the replay is timed apart from it.
  const compileStarted = performance.now();
  await api(server, apiKey, 'POST', `/api/v1/plan/check?appId=${tenant.appId}`, {
    events: [{ eventName: 'Plan.e0' }],
  });
  const compileSeconds = (performance.now() - compileStarted) / 1000;
  const started = performance.now();
  const res = await api(server, apiKey, 'POST', `/api/v1/quarantine/replay?appId=${tenant.appId}`, {});
  const seconds = (performance.now() - started) / 1000;
  if (res.body.replayed !== SIZES.replay) throw new Error(`replay: ${JSON.stringify(res.body)}`);
  return {
    events: SIZES.replay,
    seconds: Math.round(seconds * 1000) / 1000,
    eventsPerSec: Math.round(SIZES.replay / seconds),
    planCompileSeconds: Math.round(compileSeconds * 1000) / 1000,
  };
}

const round2 = (x) => Math.round(x * 100) / 100;
const round3 = (x) => Math.round(x * 1000) / 1000;

/** Alternating rounds of the two sides on one server; the plan's cost is the median difference. */
async function pairRounds(server, plain, planned) {
  const rounds = [];
  for (let i = 0; i < SIZES.rounds; i++) {
    // Alternate which side goes first, so that neither always inherits the other's garbage.
    let noPlan;
    let withPlan;
    if (i % 2 === 0) {
      noPlan = await loadRun(server, plain, `a${i}`);
      withPlan = await loadRun(server, planned, `b${i}`);
    } else {
      withPlan = await loadRun(server, planned, `b${i}`);
      noPlan = await loadRun(server, plain, `a${i}`);
    }
    rounds.push({ noPlan, withPlan, deltaUs: withPlan.serverCpuUsPerEvent - noPlan.serverCpuUsPerEvent });
    log(
      `plans round ${i}: no plan ${noPlan.serverCpuUsPerEvent.toFixed(2)} µs/event, plan ${withPlan.serverCpuUsPerEvent.toFixed(2)} µs/event`,
    );
  }
  const deltas = rounds.map((r) => r.deltaUs);
  const [q1, q3] = quartiles(deltas);
  return {
    method:
      'Server CPU (sum of its threads, /proc schedstat) per accepted event, one server, the two apps in ' +
      'alternating rounds; the plan cost is the median of the per-round differences.',
    rounds: rounds.map((r) => ({
      noPlan: {
        eventsPerSec: r.noPlan.eventsPerSec,
        serverCpuUsPerEvent: round2(r.noPlan.serverCpuUsPerEvent),
      },
      withPlan: {
        eventsPerSec: r.withPlan.eventsPerSec,
        serverCpuUsPerEvent: round2(r.withPlan.serverCpuUsPerEvent),
      },
      deltaUs: round2(r.deltaUs),
    })),
    medianNoPlanCpuUsPerEvent: round2(median(rounds.map((r) => r.noPlan.serverCpuUsPerEvent))),
    medianWithPlanCpuUsPerEvent: round2(median(rounds.map((r) => r.withPlan.serverCpuUsPerEvent))),
    medianPlanCostUsPerEvent: round2(median(deltas)),
    meanPlanCostUsPerEvent: round2(deltas.reduce((a, b) => a + b, 0) / deltas.length),
    planCostInterquartileUs: [round2(q1), round2(q3)],
  };
}

async function measure(dist, cluster) {
  const url = withDatabase(cluster.url, 'bench_plans');
  await recreateDatabase(cluster.url, 'bench_plans');
  const server = await startServer({ dist, databaseUrl: url });
  const db = await connect(url);
  try {
    const plain = await makeTenant(dist, url, 'bench-no-plan');
    const planned = await makeTenant(dist, url, 'bench-plan');
    const replay = await makeTenant(dist, url, 'bench-replay');
    const keyFor = async (appId) =>
      (
        await cli(dist, url, [
          'keys',
          'create-api',
          '--app',
          appId,
          '--scope',
          'plans:read',
          '--scope',
          'plans:write',
        ])
      ).key;
    await putPlan(server, await keyFor(planned.appId), planned.appId, benchPlan('enforce'));
    // Warm-up: the 50 compiled validators reach V8's optimising tier only after some 10^6 events;
    // a server that runs a plan is in that state, and the pair measures it.
    const warmStarted = performance.now();
    let warmPlanCpu = 0;
    for (let i = 0; i < 3; i++) await loadRun(server, plain, `warm-a${i}`);
    for (let sent = 0, i = 0; sent < SIZES.warmEvents; sent += 1000 * SIZES.batch, i++) {
      warmPlanCpu = (await loadRun(server, planned, `warm-b${i}`, 1000)).serverCpuUsPerEvent;
    }
    log(
      `plans warm-up: ${((performance.now() - warmStarted) / 1000).toFixed(1)} s, last ${warmPlanCpu.toFixed(2)} µs/event`,
    );
    const pair = await pairRounds(server, plain, planned);
    const replayed = await replayRun(server, replay, await keyFor(replay.appId));
    log(`replay: ${replayed.eventsPerSec} events/s`);
    const layers = planLayersInProcess(dist);
    return {
      pair,
      noPlanCost: await noPlanCost(dist),
      planLayersInProcess: {
        gateUsPerEvent: round3(layers.gateUsPerEvent),
        settleUsPerEvent: round3(layers.settleUsPerEvent),
        warmUpEvents: layers.warmUpEvents,
      },
      replay: replayed,
    };
  } finally {
    await db.end();
    await server.stop();
  }
}

/** `npm run bench -- --plans`: measures, prints, and records the `plans` section of latest.json. */
export async function plansBenchmarkMain() {
  const dist = await snapshotDist();
  const cluster = await startCluster();
  const loadBefore = os.loadavg()[0];
  let plans;
  try {
    plans = await measure(dist, cluster);
  } finally {
    if (cluster.temporary || !flags['keep-pg']) await stopCluster(cluster.dir);
    fs.rmSync(dist, { recursive: true, force: true });
  }
  plans.sizes = { ...SIZES, planEvents: EVENTS, propertiesPerEvent: PROPS };
  plans.loadAverage = { before: loadBefore, after: os.loadavg()[0] };
  plans.cores = os.cpus().length;
  plans.timestamp = new Date().toISOString();
  plans.targets = {
    planCostUsPerEvent: {
      target: 1,
      value: plans.pair.medianPlanCostUsPerEvent,
      met: plans.pair.medianPlanCostUsPerEvent <= 1,
    },
    noPlanCostUsPerEvent: {
      target: 0.1,
      value: plans.noPlanCost.perEventUs,
      met: plans.noPlanCost.perEventUs <= 0.1,
    },
    replayEventsPerSec: {
      target: 20_000,
      value: plans.replay.eventsPerSec,
      met: plans.replay.eventsPerSec >= 20_000,
    },
  };
  const file = path.join(ROOT, 'bench', 'results', 'latest.json');
  let results = { schema: 1 };
  try {
    results = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    /* no full run recorded yet */
  }
  results.plans = plans;
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(results, null, 2) + '\n');
  process.stdout.write(`${JSON.stringify(plans, null, 2)}\n`);
  return 0;
}
