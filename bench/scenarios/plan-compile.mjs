/* global fetch, performance */
// Hostile tracking plans against another app's latency: `node bench/scenarios/plan-compile.mjs
// --quick` after `npm run build`. Not part of bench/run.mjs; prints its figures and writes nothing.
//
// One server (as `npm start` runs it). A victim app sends a one-event batch and a GET /healthz in
// turn, every 10 ms, for the whole run; its slowest answers are read per phase, with the server's
// own longest event-loop delay (`loopMaxMs`, from /metrics), which the machine's other load does
// not inflate the way it inflates answer times:
//  - baseline: nothing else happens;
//  - each hostile plan PUT in a loop by another tenant: the probe's plan (1,000 events × 11
//    properties with the pattern `^(a|b|c){1,25}x$`, 625 KB), a 2,000-definition plan, the
//    deepest allowed plan (as many definitions nested to the 32-level bound as 50,000 nodes allow), and the
//    probe's plan with every pattern distinct (past the compile's memory cap: refused);
//  - the first ingest of an app holding the probe's plan, right after a restart of the server.
import { stop as stopCluster } from '../../src/database/embedded-pg.mjs';
import { recreateDatabase, withDatabase } from '../lib/db.mjs';
import { cli, startServer } from '../lib/processes.mjs';
import { ingestHeaders, log, makeTenant, snapshotDist, startCluster } from '../lib/common.mjs';

const PUTS_PER_PLAN = 3;
const SAMPLE_GAP_MS = 10;

function probePlan(distinct = false) {
  const events = {};
  for (let e = 0; e < 1000; e++) {
    const properties = {};
    for (let i = 0; i < 11; i++) {
      properties[`p${i}`] = {
        type: 'string',
        pattern: distinct ? `^(a|b|c){1,25}x${e}_${i}$` : '^(a|b|c){1,25}x$',
      };
    }
    events[`E${e}`] = { payload: { type: 'object', properties } };
  }
  return { mode: 'enforce', events };
}

function widePlan() {
  const events = {};
  for (let e = 0; e < 2000; e++) {
    events[`Event.number${e}`] = {
      description: 'One of many.',
      payload: {
        type: 'object',
        required: ['a'],
        additionalProperties: false,
        properties: { a: { type: 'string', enum: ['x', 'y', `v${e}`] }, b: { type: 'integer', minimum: 0 } },
      },
    };
  }
  return { mode: 'enforce', events };
}

/** Definitions nested to the bound (the payload schema is level 1; 15 object levels and a leaf: 31). */
function deepPlan() {
  const events = {};
  let nodes = 0;
  for (let e = 0; nodes < 45_000; e++) {
    let schema = { type: 'string', pattern: '^[a-z]+$' };
    for (let i = 0; i < 15; i++) schema = { type: 'object', properties: { a: schema } };
    events[`Deep${e}`] = { payload: schema };
    nodes += 15 * 4 + 3;
  }
  return { mode: 'enforce', events };
}

/** The victim's answers: one-event ingest and /healthz in turn, every SAMPLE_GAP_MS, until stopped. */
function startVictim(baseUrl, ingestKey) {
  const samples = [];
  let running = true;
  const loop = (async () => {
    for (let i = 0; running; i++) {
      const started = performance.now();
      const res =
        i % 2 === 0
          ? await fetch(`${baseUrl}/api/ingest`, {
              method: 'POST',
              headers: ingestHeaders(ingestKey),
              body: JSON.stringify({ events: [{ eventName: 'Victim.ping' }] }),
            })
          : await fetch(`${baseUrl}/healthz`);
      await res.arrayBuffer();
      samples.push({ at: started, ms: performance.now() - started, status: res.status });
      await new Promise((r) => setTimeout(r, SAMPLE_GAP_MS));
    }
  })();
  return {
    /** Slowest and p99 of the answers that started in [from, to). */
    window(from, to) {
      const ms = samples
        .filter((s) => s.at >= from && s.at < to)
        .map((s) => s.ms)
        .sort((a, b) => a - b);
      const bad = samples.filter((s) => s.at >= from && s.at < to && s.status !== 200).length;
      return {
        answers: ms.length,
        not200: bad,
        p50: +(ms[Math.floor(ms.length * 0.5)] ?? 0).toFixed(1),
        p99: +(ms[Math.floor(ms.length * 0.99)] ?? 0).toFixed(1),
        max: +(ms[ms.length - 1] ?? 0).toFixed(1),
      };
    },
    async stop() {
      running = false;
      await loop;
    },
  };
}

async function put(baseUrl, key, appId, plan) {
  const body = JSON.stringify(plan);
  const started = performance.now();
  const res = await fetch(`${baseUrl}/api/v1/plan?appId=${appId}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'if-match': '*' },
    body,
  });
  const answer = await res.json();
  return {
    status: res.status,
    ms: Math.round(performance.now() - started),
    kb: Math.round(body.length / 1024),
    problem: answer.problems?.[0]?.message,
  };
}

/**
 * The server's longest event-loop delay since the last call, in ms: prom-client's
 * `nodejs_eventloop_lag_max_seconds` (perf_hooks.monitorEventLoopDelay, reset at each scrape).
 */
async function loopDelayMax(baseUrl) {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const m = /^nodejs_eventloop_lag_max_seconds (\S+)$/m.exec(text);
  return m ? +(Number(m[1]) * 1000).toFixed(1) : null;
}

async function phase(name, victim, work, baseUrl) {
  await loopDelayMax(baseUrl);
  const from = performance.now();
  const detail = await work();
  const loopMaxMs = await loopDelayMax(baseUrl);
  const figures = { phase: name, loopMaxMs, ...victim.window(from, performance.now()), ...detail };
  log(JSON.stringify(figures));
  return figures;
}

async function hostilePhases(server, victim, hostile) {
  const results = [];
  await new Promise((r) => setTimeout(r, 2000));
  results.push(
    await phase(
      'baseline (5 s)',
      victim,
      () => new Promise((r) => setTimeout(() => r({}), 5000)),
      server.baseUrl,
    ),
  );
  const plans = [
    ['probe plan, 1,000 × 11 patterns', probePlan()],
    ['2,000 definitions', widePlan()],
    ['deepest allowed', deepPlan()],
    ['probe plan, distinct patterns', probePlan(true)],
  ];
  for (const [name, plan] of plans) {
    results.push(
      await phase(
        `PUT ${name} ×${PUTS_PER_PLAN}`,
        victim,
        async () => {
          const puts = [];
          for (let i = 0; i < PUTS_PER_PLAN; i++)
            puts.push(await put(server.baseUrl, hostile.apiKey, hostile.appId, plan));
          return { puts };
        },
        server.baseUrl,
      ),
    );
  }
  return results;
}

async function main() {
  const dist = await snapshotDist();
  const cluster = await startCluster();
  const url = withDatabase(cluster.url, 'bench_plan_compile');
  await recreateDatabase(cluster.url, 'bench_plan_compile');
  let server = await startServer({ dist, databaseUrl: url });
  const results = [];
  try {
    const victimApp = await makeTenant(dist, url, 'victim');
    const hostile = await makeTenant(dist, url, 'hostile');
    const apiKey = async (appId) =>
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
    hostile.apiKey = await apiKey(hostile.appId);
    let victim = startVictim(server.baseUrl, victimApp.ingestKey);
    results.push(...(await hostilePhases(server, victim, hostile)));
    await victim.stop();

    // The probe's plan stored, then a restart: the app's first ingest compiles it.
    const stored = await put(server.baseUrl, hostile.apiKey, hostile.appId, probePlan());
    log(`stored the probe plan for the restart: ${JSON.stringify(stored)}`);
    await server.stop();
    server = await startServer({ dist, databaseUrl: url });
    victim = startVictim(server.baseUrl, victimApp.ingestKey);
    await new Promise((r) => setTimeout(r, 3000));
    results.push(
      await phase(
        'first ingest after a restart',
        victim,
        async () => {
          const started = performance.now();
          const res = await fetch(`${server.baseUrl}/api/ingest`, {
            method: 'POST',
            headers: ingestHeaders(hostile.ingestKey),
            body: JSON.stringify({ events: [{ eventName: 'E1', payload: { p0: 'abx' } }] }),
          });
          const body = await res.json();
          return {
            status: res.status,
            firstIngestMs: Math.round(performance.now() - started),
            accepted: body.accepted,
          };
        },
        server.baseUrl,
      ),
    );
    await victim.stop();
    const { rss, sampledPeak } = server.memory();
    log(
      `server RSS after the restart phase: ${Math.round(rss / 2 ** 20)} MB (peak ${Math.round(sampledPeak / 2 ** 20)} MB)`,
    );
  } finally {
    await server.stop();
    if (cluster.temporary) await stopCluster(cluster.dir);
  }
  console.log(JSON.stringify(results, null, 2));
}

await main();
