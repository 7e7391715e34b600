/* global fetch, performance */
// Tracking plans (`npm run bench -- --plans`): what a plan costs ingest, and how fast a replay runs.
// Writes the `plans` section of bench/results/latest.json and nothing else.
//
//  - ingest with a 50-event plan (10 payload properties each, mode enforce, every event passing)
//    against the same load for an app without a plan, measured as a pair: alternating rounds on one
//    server, so that both sides see the same machine. Server CPU per event is the figure that
//    matters; the difference of the two is the plan's cost.
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
import { cli, cpuSecondsOf, startServer } from '../lib/processes.mjs';
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
  ? { requests: 60, rounds: 2, batch: 100, connections: 8, replay: 2_000, warmEvents: 0 }
  : { requests: 400, rounds: 4, batch: 100, connections: 16, replay: 20_000, warmEvents: 1_600_000 };
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

async function loadRun(server, tenant, name) {
  const runId = `${name}-${Date.now().toString(36)}`;
  const bodies = Array.from({ length: SIZES.requests }, (_, i) => body(runId, i, SIZES.batch));
  const cpuBefore = cpuSecondsOf(server.pid);
  const r = await runLoad({
    url: `${server.baseUrl}/api/ingest`,
    method: 'POST',
    headers: ingestHeaders(tenant.ingestKey),
    // A function, not the array: autocannon replays an array's requests from the start on every
    // connection, which would send the same eventIds again.
    body: (i) => bodies[i],
    connections: SIZES.connections,
    amount: SIZES.requests,
    count: true,
  });
  const cpu = cpuSecondsOf(server.pid) - cpuBefore;
  const accepted = r.totals.accepted;
  if (accepted !== SIZES.requests * SIZES.batch)
    throw new Error(`${name}: ${accepted} accepted of ${SIZES.requests * SIZES.batch}`);
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

/**
 * The plan's own cost in-process, on the built code: the gate of a 50-event enforced plan applied
 * to events that follow it, per event. Free of the HTTP and database noise of the pair.
 */
function planGateCost(dist) {
  const require = createRequire(import.meta.url);
  const { compilePlan } = require(path.join(dist, 'src/plans/plan-compiler.js'));
  const { PlanGate } = require(path.join(dist, 'src/plans/plan-gate.js'));
  const compiled = compilePlan(benchPlan('enforce'), 1);
  if (!compiled.ok) throw new Error(JSON.stringify(compiled.problems));
  const events = Array.from({ length: 1000 }, (_, n) => ({
    eventName: `Plan.e${n % EVENTS}`,
    floatValue: null,
    payload: payload(n),
  }));
  const sink = { rejectLater() {}, warnLater() {} };
  const run = (n) => {
    let gate = new PlanGate(compiled.compiled, sink);
    for (let i = 0; i < n; i++) {
      if (i % 100 === 0) gate = new PlanGate(compiled.compiled, sink);
      if (!gate.admit(events[i % events.length])) throw new Error('rejected');
    }
  };
  // 50 compiled validators reach V8's optimising tier only after some 10^6 events in all (about
  // 4 µs per event before, under 1 µs after, on this box): the steady state is what a server runs.
  run(2_000_000);
  const n = 1_000_000;
  const started = process.hrtime.bigint();
  run(n);
  return { perEventUs: Number(process.hrtime.bigint() - started) / n / 1000 };
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
    for (let i = 0; i < 3; i++) await loadRun(server, plain, `warm-a${i}`);
    for (let sent = 0, i = 0; sent < SIZES.warmEvents; sent += SIZES.requests * SIZES.batch, i++) {
      await loadRun(server, planned, `warm-b${i}`);
    }
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
    const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const replayed = await replayRun(server, replay, await keyFor(replay.appId));
    log(`replay: ${replayed.eventsPerSec} events/s`);
    return {
      pair: {
        rounds: rounds.map((r) => ({
          noPlan: {
            eventsPerSec: r.noPlan.eventsPerSec,
            serverCpuUsPerEvent: round2(r.noPlan.serverCpuUsPerEvent),
          },
          withPlan: {
            eventsPerSec: r.withPlan.eventsPerSec,
            serverCpuUsPerEvent: round2(r.withPlan.serverCpuUsPerEvent),
          },
        })),
        medianPlanCostUsPerEvent: round2(median(rounds.map((r) => r.deltaUs))),
      },
      noPlanCost: await noPlanCost(dist),
      planGateInProcess: planGateCost(dist),
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
