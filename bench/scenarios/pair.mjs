// Paired A/B: two builds of the server loaded at the same time, on the same machine, against one
// PostgreSQL cluster, each with a database of its own. Whatever the machine does during a round
// (another tenant of the VM, a slower core, a checkpoint) it does to both sides, so the ratio of
// their CPU per event holds far better than two runs made one after the other, whose figures move
// ±25 % on the reference machine.
//
//   npm run build && cp -r dist bench/.cache/dist-a      # the "before" build
//   (change the code) && npm run build
//   node bench/run.mjs --pair --a bench/.cache/dist-a    # B is the current dist/
//
// Options: --b <dist> (default: the current dist/), --rounds <n> (default 5), --env-a / --env-b
// KEY=VALUE (repeatable: settings of one side's server), --sql-a / --sql-b <statement>
// (repeatable: run in that side's database after its migrations, for a schema lever). With the
// same build on both sides and no options it measures the method's own spread (an A/A run).
//
// Every round starts both servers afresh (and warms them up), in alternating order: two
// processes of one build can differ by 5–10 % for their whole life (where V8 placed and
// optimised their code, how their connection pools grouped statements), so rounds on the same
// two processes share that offset, and only fresh processes each round average it out.
//
// Per round and side it reports the server's CPU per accepted event and the CPU of the
// PostgreSQL backends serving that side's database; the WAL writer and checkpointer are shared
// and not counted, and the server's peak RSS. Results go to bench/results/pair.json.
import fs from 'node:fs';
import path from 'node:path';
import { batchTemplate } from '../lib/events.mjs';
import { runLoad } from '../lib/load.mjs';
import { clusterProcesses, cpuSecondsOf, startServer } from '../lib/processes.mjs';
import { connect, countEvents, recreateDatabase, withDatabase } from '../lib/db.mjs';
import { BENCH, ROOT, flags, log, check, makeTenant, ingestHeaders } from '../lib/common.mjs';

const CONNECTIONS = 64;
const BATCH = 100;
const WARMUP_REQUESTS = 600;
const REQUESTS_PER_ROUND = 1500;

/** `KEY=VALUE` strings as an object. */
function envOf(list = []) {
  return Object.fromEntries(
    list.map((kv) => {
      const i = kv.indexOf('=');
      if (i < 1) throw new Error(`expected KEY=VALUE, got ${kv}`);
      return [kv.slice(0, i), kv.slice(i + 1)];
    }),
  );
}

/** PIDs of the cluster's backends connected to `database` (from their process titles). */
function backendsOf(pgDir, database) {
  return (clusterProcesses(pgDir)?.children ?? []).filter((pid) => {
    try {
      // "postgres: <user> <database> <host>(<port>) <state>"
      return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split(' ')[2] === database;
    } catch {
      return false; // exited
    }
  });
}

async function prepareSide(name, { dist, cluster, env, sql }) {
  const database = `bench_pair_${name}`;
  const url = withDatabase(cluster.url, database);
  await recreateDatabase(cluster.url, database);
  // The first start runs the migrations, before the side's own statements.
  const side = { name, dist, env, url, database, server: await startServer({ dist, databaseUrl: url, env }) };
  side.db = await connect(url);
  for (const statement of sql) await side.db.query(statement);
  side.tenant = await makeTenant(dist, url, `pair-${name}`);
  side.pgDir = path.join(cluster.dir, 'pg');
  log(`side ${name}: ${path.relative(ROOT, dist) || dist}, database ${database}`);
  return side;
}

/** Replaces the side's server with a fresh process. */
async function restart(side) {
  await side.server?.stop();
  side.server = undefined;
  side.server = await startServer({ dist: side.dist, databaseUrl: side.url, env: side.env });
}

/** Loads one side with `amount` requests; resolves with its CPU and event counts. */
async function load(side, amount, round) {
  const templates = Array.from({ length: 16 }, (_, i) => batchTemplate(round * 100 + i, BATCH));
  const runId = `${side.name}-${round}-${Date.now().toString(36)}`;
  // Counted outside the measured span: the count's own backend serves the same database.
  const rowsBefore = await countEvents(side.db, side.tenant.appId);
  const backends = new Map(backendsOf(side.pgDir, side.database).map((pid) => [pid, cpuSecondsOf(pid)]));
  const serverBefore = cpuSecondsOf(side.server.pid);
  const result = await runLoad({
    url: `${side.server.baseUrl}/api/ingest`,
    method: 'POST',
    headers: ingestHeaders(side.tenant.ingestKey),
    body: (i) => templates[i % templates.length].render(`${runId}.${i.toString(36)}`),
    connections: CONNECTIONS,
    amount,
    count: true,
    maxSeconds: 120,
  });
  const serverSeconds = cpuSecondsOf(side.server.pid) - serverBefore;
  let pgSeconds = 0;
  const after = backendsOf(side.pgDir, side.database);
  for (const pid of after) pgSeconds += cpuSecondsOf(pid) - (backends.get(pid) ?? 0);
  const lost = [...backends.keys()].filter((pid) => !after.includes(pid));
  const rows = (await countEvents(side.db, side.tenant.appId)) - rowsBefore;
  // The server was started afresh for the round: its peak covers the warm-up and this load.
  const peakRssMb = side.server.memory().sampledPeak / 1_048_576;
  return { result, serverSeconds, pgSeconds, rows, lostBackends: lost.length, peakRssMb };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const round1 = (x) => Math.round(x * 10) / 10;
const round3 = (x) => Math.round(x * 1000) / 1000;

export async function pairMode({ dist, cluster }) {
  if (!flags.a) throw new Error('--pair needs --a <dist folder> (a copy of dist/ built before the change)');
  const rounds = Number(flags.rounds ?? 5);
  const sides = [];
  try {
    sides.push(
      await prepareSide('a', {
        dist: path.resolve(flags.a),
        cluster,
        env: envOf(flags['env-a']),
        sql: flags['sql-a'] ?? [],
      }),
    );
    sides.push(
      await prepareSide('b', {
        dist: flags.b ? path.resolve(flags.b) : dist,
        cluster,
        env: envOf(flags['env-b']),
        sql: flags['sql-b'] ?? [],
      }),
    );
    const table = [];
    for (let r = 1; r <= rounds; r++) {
      for (const s of r % 2 ? sides : [...sides].reverse()) await restart(s);
      await Promise.all(sides.map((s) => load(s, WARMUP_REQUESTS, 0)));
      const [a, b] = await Promise.all(sides.map((s) => load(s, REQUESTS_PER_ROUND, r)));
      const row = { round: r };
      for (const [name, m] of [
        ['a', a],
        ['b', b],
      ]) {
        const accepted = m.result.totals.accepted;
        const sent = m.result.requests * BATCH;
        check(
          `pair round ${r} side ${name}: every event accepted and stored`,
          m.result.errors + m.result.non2xx + m.result.timeouts === 0 && accepted === sent && m.rows === sent,
          `sent ${sent}, accepted ${accepted}, rows ${m.rows}, errors ${m.result.errors}, non-2xx ${m.result.non2xx}`,
        );
        if (m.lostBackends)
          log(`round ${r} side ${name}: ${m.lostBackends} backends exited; their CPU is missing`);
        row[name] = {
          eventsPerSec: Math.round(accepted / m.result.seconds),
          serverUs: round1((m.serverSeconds / accepted) * 1e6),
          postgresUs: round1((m.pgSeconds / accepted) * 1e6),
          peakRssMb: Math.round(m.peakRssMb),
        };
      }
      row.ratio = {
        server: round3(row.b.serverUs / row.a.serverUs),
        postgres: round3(row.b.postgresUs / row.a.postgresUs),
      };
      table.push(row);
      log(
        `round ${r}: server a ${row.a.serverUs} b ${row.b.serverUs} µs/event (b/a ${row.ratio.server}); ` +
          `postgres a ${row.a.postgresUs} b ${row.b.postgresUs} (b/a ${row.ratio.postgres}); ` +
          `events/s a ${row.a.eventsPerSec} b ${row.b.eventsPerSec}; peak RSS a ${row.a.peakRssMb} b ${row.b.peakRssMb} MB`,
      );
    }
    const summary = {};
    for (const k of ['server', 'postgres']) {
      const ratios = table.map((t) => t.ratio[k]);
      summary[k] = {
        medianRatio: round3(median(ratios)),
        minRatio: Math.min(...ratios),
        maxRatio: Math.max(...ratios),
        medianA: round1(median(table.map((t) => t.a[`${k}Us`]))),
        medianB: round1(median(table.map((t) => t.b[`${k}Us`]))),
      };
    }
    summary.peakRssMb = {
      medianA: median(table.map((t) => t.a.peakRssMb)),
      medianB: median(table.map((t) => t.b.peakRssMb)),
    };
    const out = {
      timestamp: new Date().toISOString(),
      a: { dist: flags.a, env: envOf(flags['env-a']), sql: flags['sql-a'] ?? [] },
      b: { dist: flags.b ?? 'dist', env: envOf(flags['env-b']), sql: flags['sql-b'] ?? [] },
      connectionsPerSide: CONNECTIONS,
      batch: BATCH,
      requestsPerRound: REQUESTS_PER_ROUND,
      rounds: table,
      summary,
    };
    fs.writeFileSync(path.join(BENCH, 'results', 'pair.json'), JSON.stringify(out, null, 2) + '\n');
    process.stdout.write(
      `server µs/event: a ${summary.server.medianA}, b ${summary.server.medianB}, b/a median ${summary.server.medianRatio} ` +
        `(${summary.server.minRatio}–${summary.server.maxRatio})\n` +
        `postgres µs/event: a ${summary.postgres.medianA}, b ${summary.postgres.medianB}, b/a median ${summary.postgres.medianRatio} ` +
        `(${summary.postgres.minRatio}–${summary.postgres.maxRatio})\n` +
        `server peak RSS: a ${summary.peakRssMb.medianA} MB, b ${summary.peakRssMb.medianB} MB (medians)\nResults: bench/results/pair.json\n`,
    );
  } finally {
    for (const s of sides) {
      await s.db?.end().catch(() => {});
      await s.server?.stop();
    }
  }
}
