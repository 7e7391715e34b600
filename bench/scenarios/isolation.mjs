// Tenant isolation under hostile tenants: `npm run bench -- --isolation [--quick]`.
//
// A victim app works at a steady pace, as a service does: a 100-event batch every 50 ms on one
// connection and a page of its events every 100 ms on another. It does so alone, and while an
// attacker app sends all-rejected 1,000-event batches (about 946 KB each) on 4 connections, back
// to back, in two manners, the three in windows of 7.5 s that take turns (interleaved()):
//  - `attacked`: within its limits, at its full rate: on a 429 it waits Retry-After, as the
//    limits ask. This is the figure the ≤ 2× target is about;
//  - `attackedIgnoringRetryAfter`: it resends at once after every 429, so each refusal costs
//    the server a connection and part of an upload. Reported beside it.
// The server runs with the product's default limits, once with the ingest CPU budget
// (INGEST_CPU_MS_PER_SECOND at its default) and once with it out of reach, so the ratios show
// what the budget does. The load generators run on the same 2 cores as the server and its
// database, so every byte the attacker sends also costs the machine on the client's side. Also
// measured: the budget's own cost per ingest request, in process. The figures go to
// bench/results/latest.json (quick.json with --quick) under `isolation`. On a machine shared
// with other work they are indicative only. The other hostile tenants (isolation-attackers.mjs)
// follow, each one's windows taking turns with windows of the victim alone.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';
import { ROOT } from '../lib/common.mjs';
import * as attackers from './isolation-attackers.mjs';

const VICTIM_INGEST_EVERY_MS = 50;
const VICTIM_READ_EVERY_MS = 100;
// The export horizon of the benchmark's server: the large events are exportable this soon.
const EXPORT_SETTLE_MS = 1000;
// The other attackers' phases: about 450 victim reads each, so that the read p99 is the fifth-
// slowest answer rather than the second (the alone phase is as long).
const ATTACKER_PHASE_SECONDS = 45;
// Each variant's time comes in windows this long, interleaved with the others' (interleaved()).
const WINDOW_SECONDS = 7.5;
// After a window with an attacker: its last requests end before the next window.
const SETTLE_MS = 1000;

function percentile(values, p) {
  if (!values.length) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

const summary = (values) => ({
  requests: values.length,
  p50Ms: percentile(values, 50),
  p99Ms: percentile(values, 99),
});

/** One HTTP request on `agent`; resolves with its status and time, never rejects. */
function send(agent, url, { method = 'GET', headers = {}, body } = {}) {
  const started = performance.now();
  return new Promise((resolve) => {
    const req = http.request(url, { method, agent, headers }, (res) => {
      res.resume();
      const retryAfter = Number(res.headers['retry-after'] ?? 0);
      res.on('end', () => resolve({ status: res.statusCode, ms: performance.now() - started, retryAfter }));
      res.on('error', () => resolve({ status: 0, ms: performance.now() - started }));
    });
    req.on('error', () => resolve({ status: 0, ms: performance.now() - started }));
    req.end(body);
  });
}

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `step` until `deadline`, one at a time: every `everyMs` when given (a paced client; a slow
 * answer makes the next request go at once), else back to back. With `honourRetryAfter`, a 429
 * waits its Retry-After first. Collects the times of answers with `okStatus`.
 */
async function loop(deadline, step, okStatus, into, { everyMs = 0, honourRetryAfter = false } = {}) {
  const statuses = {};
  let next = performance.now();
  while (performance.now() < deadline) {
    const { status, ms, retryAfter } = await step();
    statuses[status] = (statuses[status] ?? 0) + 1;
    if (status === okStatus) into.push(ms);
    // Pacing, not a wait for a condition: the clients model a steady service and a polite one.
    if (honourRetryAfter && status === 429) await pause(Math.max(1, retryAfter) * 1000);
    next += everyMs;
    const wait = next - performance.now();
    if (wait > 0) await pause(wait);
    else next = performance.now();
  }
  return statuses;
}

const victimBatch = (n) =>
  JSON.stringify({ events: Array.from({ length: n }, (_, i) => ({ eventName: `Victim.${i % 5}` })) });

/** Adds the counts of `counts` (status → number) into `into`. */
const addCounts = (into, counts) => {
  for (const [k, v] of Object.entries(counts)) into[k] = (into[k] ?? 0) + v;
  return into;
};

/**
 * One measured phase: the victim alone, or beside `attack` (an attacker of
 * isolation-attackers.mjs with its prepared `state`) on its own connections.
 */
async function phase({ baseUrl, victim, attack, seconds, honourRetryAfter = true }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 2 + (attack?.attacker.connections ?? 0) });
  const deadline = performance.now() + seconds * 1000;
  const ingestMs = [];
  const readMs = [];
  const body = victimBatch(100);
  const ingestHeaders = { authorization: `Bearer ${victim.ingestKey}`, 'content-type': 'application/json' };
  const work = [
    loop(
      deadline,
      () => send(agent, `${baseUrl}/api/ingest`, { method: 'POST', headers: ingestHeaders, body }),
      200,
      ingestMs,
      { everyMs: VICTIM_INGEST_EVERY_MS },
    ),
    loop(
      deadline,
      () =>
        send(agent, `${baseUrl}/api/v1/events?appId=${victim.appId}&limit=100`, {
          headers: { authorization: `Bearer ${victim.apiKey}` },
        }),
      200,
      readMs,
      { everyMs: VICTIM_READ_EVERY_MS },
    ),
  ];
  const attacks = [];
  for (let i = 0; i < (attack?.attacker.connections ?? 0); i++) {
    const step = () => {
      const { path: route, ...req } = attack.attacker.request(attack.state);
      return send(agent, `${baseUrl}${route}`, req);
    };
    attacks.push(loop(deadline, step, 200, [], { honourRetryAfter }));
  }
  const [ingestStatuses, readStatuses, ...attackStatuses] = await Promise.all([...work, ...attacks]);
  agent.destroy();
  const attackerAnswers = {};
  for (const s of attackStatuses) addCounts(attackerAnswers, s);
  return { ingestMs, readMs, ingestStatuses, readStatuses, attackerAnswers };
}

/**
 * Alternates windows of WINDOW_SECONDS of each variant (the victim alone, or beside an
 * attacker: { attack, honourRetryAfter }) until each has had `seconds`, and pools each variant's
 * answers. A shared machine's load drifts by the minute; in consecutive phases that drift fell
 * on one variant and not the other, and the ratio of two p99s moved with it (one attacker gave
 * ×1.6 and ×2.3 in runs back to back). Interleaved, the drift weighs on every variant alike. The
 * order of the variants turns with each window, and after a window with an attacker a pause
 * lets its last requests end before the next window starts.
 */
async function interleaved({ baseUrl, victim, variants, seconds, quick }) {
  const names = Object.keys(variants);
  // --quick: one window of each.
  const windows = quick ? 1 : Math.max(1, Math.round(seconds / WINDOW_SECONDS));
  const pooled = Object.fromEntries(
    names.map((n) => [
      n,
      { ingestMs: [], readMs: [], ingestStatuses: {}, readStatuses: {}, attackerAnswers: {} },
    ]),
  );
  for (let w = 0; w < windows; w++) {
    for (let k = 0; k < names.length; k++) {
      const name = names[(w + k) % names.length];
      const { attack, honourRetryAfter = true } = variants[name];
      const r = await phase({ baseUrl, victim, attack, seconds: seconds / windows, honourRetryAfter });
      const into = pooled[name];
      into.ingestMs.push(...r.ingestMs);
      into.readMs.push(...r.readMs);
      addCounts(into.ingestStatuses, r.ingestStatuses);
      addCounts(into.readStatuses, r.readStatuses);
      addCounts(into.attackerAnswers, r.attackerAnswers);
      // The settling of an attacker's last requests, not a wait for a condition.
      if (attack) await pause(SETTLE_MS);
    }
  }
  return Object.fromEntries(
    names.map((n) => {
      const p = pooled[n];
      return [
        n,
        {
          ingest: { ...summary(p.ingestMs), statuses: p.ingestStatuses },
          read: { ...summary(p.readMs), statuses: p.readStatuses },
          ...(variants[n].attack ? { attackerAnswers: p.attackerAnswers } : {}),
        },
      ];
    }),
  );
}

const ratio = (a, b) => (a && b ? a / b : null);

function ratios(alone, attacked) {
  return {
    ingestP50: ratio(attacked.ingest.p50Ms, alone.ingest.p50Ms),
    ingestP99: ratio(attacked.ingest.p99Ms, alone.ingest.p99Ms),
    readP50: ratio(attacked.read.p50Ms, alone.read.p50Ms),
    readP99: ratio(attacked.read.p99Ms, alone.read.p99Ms),
  };
}

/** The budget's own cost per ingest request: admit, the body charge, two timed phases, charge. */
function budgetCost(dist) {
  const require = createRequire(import.meta.url);
  const { IngestCpuBudgets } = require(path.join(dist, 'src/ingest/ingest-cpu.budget.js'));
  const budgets = new IngestCpuBudgets({ ingestCpuMsPerSecond: 1_000_000 });
  const run = (n) => {
    const started = process.hrtime.bigint();
    for (let i = 0; i < n; i++) {
      const key = `key-${i & 63}`;
      const meter = budgets.admit(key);
      meter.chargeBody(1000);
      meter.time(() => i);
      meter.stop(meter.start());
      budgets.charge(key, meter);
    }
    return Number(process.hrtime.bigint() - started) / n;
  };
  run(50_000);
  const nsPerRequest = Math.min(run(200_000), run(200_000), run(200_000));
  return { nsPerRequest, nsPerEventOf100EventBatch: nsPerRequest / 100 };
}

async function tenant(cli, dist, url, name) {
  const app = await cli(dist, url, ['apps', 'create', '--name', `${name}-${Date.now().toString(36)}`]);
  const ingest = await cli(dist, url, ['keys', 'create-ingest', '--app', app.id]);
  const api = await cli(dist, url, ['keys', 'create-api', '--app', app.id, '--scope', 'events:read']);
  return { appId: app.id, ingestKey: ingest.key, apiKey: api.key };
}

// The product's defaults for every limit the benchmark server otherwise raises out of reach.
const DEFAULT_LIMITS = {
  INGEST_RATE_REQUESTS: '100',
  INGEST_RATE_EVENTS: '50000',
  READ_RATE_REQUESTS: '50',
  READ_MAX_CONCURRENT_PER_KEY: '2',
  READ_TIME_MS_PER_SECOND: '500',
  AUTH_FAILURE_LIMIT: '20',
};

/** The tenants beside the CPU budget's own attacker, each measured in a phase of its own. */
function moreAttackers(quick) {
  return {
    planUploads: attackers.planUploads,
    largeExports: attackers.largeExports(quick ? 1000 : 5000),
    quarantineFlood: attackers.quarantineFlood,
    sdkFormatFlood: attackers.sdkFormatFlood,
  };
}

async function serverRuns({ dist, url, seconds, attackerSeconds, log, budget, quick }) {
  const { cli, startServer } = await import('../lib/processes.mjs');
  // startServer lifts the budget out of reach for the capacity runs; an empty value restores the
  // server's own default (an eighth of the cores), which is what the budget phase measures.
  const env = {
    ...DEFAULT_LIMITS,
    INGEST_CPU_MS_PER_SECOND: budget ? '' : '1000000',
    EXPORT_SETTLE_MS: String(EXPORT_SETTLE_MS),
  };
  const server = await startServer({ dist, databaseUrl: url, env });
  try {
    const context = { cli, dist, url, baseUrl: server.baseUrl, exportSettleMs: EXPORT_SETTLE_MS };
    const victim = await tenant(cli, dist, url, 'victim');
    const flood = {
      attacker: attackers.rejectedBatches,
      state: await attackers.rejectedBatches.prepare(context),
    };
    // Warm-up, so that the first measured requests pay no JIT or cache cost.
    await phase({ baseUrl: server.baseUrl, victim, seconds: 1 });
    const label = `isolation (budget ${budget ? 'on' : 'off'})`;
    log(
      `${label}: victim alone, under attack within the limits, and ignoring Retry-After, ${seconds} s each, interleaved`,
    );
    const runs = await interleaved({
      baseUrl: server.baseUrl,
      victim,
      variants: {
        alone: {},
        attacked: { attack: flood },
        attackedIgnoringRetryAfter: { attack: flood, honourRetryAfter: false },
      },
      seconds,
      quick,
    });
    const result = {
      ...runs,
      ratios: ratios(runs.alone, runs.attacked),
      ratiosIgnoringRetryAfter: ratios(runs.alone, runs.attackedIgnoringRetryAfter),
    };
    if (budget) {
      // Longer, each attacker's time interleaved with a time of the victim alone as long: a
      // hostile upload or export comes a few times a phase, so the p99 rests on few answers.
      result.attackers = await otherAttackers({ context, victim, seconds: attackerSeconds, log, quick });
    }
    return result;
  } finally {
    await server.stop();
  }
}

/** `attacker` prepared, then its windows interleaved with the victim's alone: { alone, attacked, ratios }. */
async function besideAttacker({ context, victim, attacker, seconds, quick }) {
  const state = await attacker.prepare(context);
  const runs = await interleaved({
    baseUrl: context.baseUrl,
    victim,
    variants: { alone: {}, attacked: { attack: { attacker, state } } },
    seconds,
    quick,
  });
  return { ...runs, ratios: ratios(runs.alone, runs.attacked) };
}

/** Each of `moreAttackers` against the victim, with its ratios to the victim alone. */
async function otherAttackers({ context, victim, seconds, log, quick }) {
  const out = {};
  for (const [name, attacker] of Object.entries(moreAttackers(quick))) {
    log(`isolation: the victim alone and beside the ${name} attacker, ${seconds} s each, interleaved`);
    out[name] = await besideAttacker({ context, victim, attacker, seconds, quick });
  }
  return out;
}

/** One attacker of moreAttackers beside the victim alone, printed: `--isolation --attacker <name>`. */
async function oneAttacker({ dist, url, seconds, log, quick, name }) {
  const { cli, startServer } = await import('../lib/processes.mjs');
  const env = { ...DEFAULT_LIMITS, INGEST_CPU_MS_PER_SECOND: '', EXPORT_SETTLE_MS: String(EXPORT_SETTLE_MS) };
  const server = await startServer({ dist, databaseUrl: url, env });
  try {
    const choices = { rejectedBatches: attackers.rejectedBatches, ...moreAttackers(quick) };
    const attacker = choices[name];
    if (!attacker) throw new Error(`no attacker ${name}: ${Object.keys(choices).join(', ')}`);
    const context = { cli, dist, url, baseUrl: server.baseUrl, exportSettleMs: EXPORT_SETTLE_MS };
    const victim = await tenant(cli, dist, url, 'victim');
    await phase({ baseUrl: server.baseUrl, victim, seconds: 1 });
    log(`isolation: the victim alone and beside the ${name} attacker, ${seconds} s each, interleaved`);
    return await besideAttacker({ context, victim, attacker, seconds, quick });
  } finally {
    await server.stop();
  }
}

/** `npm run bench -- --isolation`: writes the `isolation` section; resolves with the exit code. */
export async function isolationMode({
  dist,
  cluster,
  quick,
  log,
  stopCluster,
  resultsDir,
  loadAverage,
  only,
  phaseSeconds,
}) {
  if (only) {
    const seconds = phaseSeconds ?? (quick ? 3 : ATTACKER_PHASE_SECONDS);
    try {
      const result = await oneAttacker({ dist, url: cluster.url, seconds, log, quick, name: only });
      process.stdout.write(JSON.stringify(result, null, 2) + '\n');
    } finally {
      await stopCluster(cluster.dir).catch(() => undefined);
      if (cluster.temporary) fs.rmSync(cluster.dir, { recursive: true, force: true });
      fs.rmSync(dist, { recursive: true, force: true });
    }
    return 0;
  }
  // 30 s for each variant: about 600 victim ingest answers, so that the p99 is the sixth-slowest.
  const seconds = quick ? 3 : 30;
  const attackerSeconds = quick ? seconds : ATTACKER_PHASE_SECONDS;
  let result;
  try {
    const runs = { dist, url: cluster.url, seconds, attackerSeconds, log, quick };
    const withBudget = await serverRuns({ ...runs, budget: true });
    const withoutBudget = await serverRuns({ ...runs, budget: false });
    result = {
      timestamp: new Date().toISOString(),
      secondsPerPhase: seconds,
      secondsPerAttackerPhase: attackerSeconds,
      loadAverage: loadAverage(),
      note: 'Measured on a machine shared with other work: indicative figures.',
      budgetCost: budgetCost(dist),
      withBudget,
      withoutBudget,
      target: { maxRatio: 2 },
    };
    const all = [withBudget.ratios, ...Object.values(withBudget.attackers).map((a) => a.ratios)];
    const worst = Math.max(...all.flatMap((r) => Object.values(r)).filter((r) => r !== null));
    result.target.worstRatioWithBudget = worst;
    result.target.pass = worst <= 2;
  } finally {
    await stopCluster(cluster.dir).catch(() => undefined);
    if (cluster.temporary) fs.rmSync(cluster.dir, { recursive: true, force: true });
    fs.rmSync(dist, { recursive: true, force: true });
  }
  const file = path.join(resultsDir, quick ? 'quick.json' : 'latest.json');
  const results = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : {};
  results.isolation = result;
  fs.writeFileSync(file, JSON.stringify(results, null, 2) + '\n');
  const line = (name, r) =>
    `  ${name}: ingest p50 ×${r.ingestP50?.toFixed(2)} p99 ×${r.ingestP99?.toFixed(2)}, read p50 ×${r.readP50?.toFixed(2)} p99 ×${r.readP99?.toFixed(2)}`;
  process.stdout.write(
    [
      `Victim latency under attack / alone (${seconds} s phases; indicative, shared machine):`,
      line('with the CPU budget   ', result.withBudget.ratios),
      line('without the CPU budget', result.withoutBudget.ratios),
      'Attacker resending at once after every 429:',
      line('with the CPU budget   ', result.withBudget.ratiosIgnoringRetryAfter),
      line('without the CPU budget', result.withoutBudget.ratiosIgnoringRetryAfter),
      `Beside the other attackers (with the CPU budget; ${attackerSeconds} s phases):`,
      ...Object.entries(result.withBudget.attackers).map(([name, a]) => line(name.padEnd(22), a.ratios)),
      `  budget cost: ${result.budgetCost.nsPerRequest.toFixed(0)} ns per ingest request`,
      `\nResults: ${path.relative(ROOT, file)} (isolation)`,
    ].join('\n') + '\n',
  );
  return 0;
}
