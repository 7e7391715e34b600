// The Tally benchmark: `npm run bench` (full run, writes bench/results/latest.json) or
// `npm run bench -- --quick` (a small correctness run for CI, writes bench/results/quick.json).
//
// One process tree: an embedded PostgreSQL of its own, the built server as a child process, a
// bare node:http server as the HTTP ceiling, and autocannon in this process. All load goes to
// 127.0.0.1, every loop is bounded by a request count or a deadline.
//
// Flags: --quick, --skip-reads (no reads dataset, no rollup figures), --keep-pg (leave the cached
// cluster running afterwards, for inspection), --profile (write a V8 CPU profile of the ingest
// server to bench/.cache/profiles/ and list its hottest functions; with --sdk-formats, one per
// format), --cli (only the admin CLI's
// timings, bench/scenarios/cli.mjs, recorded in the `cli` section of latest.json), --isolation (a
// victim app's latency with and without a hostile ingest key, bench/scenarios/isolation.mjs,
// recorded in the `isolation` section), --pair (two builds loaded side by side,
// bench/scenarios/pair.mjs, written to bench/results/pair.json), --replica (reads on a hot standby
// against reads on the primary, bench/scenarios/replica.mjs, recorded in the `replica` section),
// --timezones [--tz-events <n>] (only the app time zone figures, bench/scenarios/timezones.mjs, in
// the `timezones` section of latest.json), --noisy-neighbours (one key's expensive reads or stalled
// uploads against another app's latency, bench/scenarios/noisy-neighbours.mjs), --name-bound (the
// ingest CPU cost of INGEST_MAX_EVENT_NAMES_PER_DAY alone, bench/scenarios/name-bound.mjs, the
// `nameBound` section of latest.json), --erasure [--erasure-scale f] (only the erasure of a heavy
// user, bench/scenarios/erasure.mjs, the `erasure` section), --export [--export-events N] (only
// the raw export, bench/scenarios/export.mjs, the `export` section), --plans (only the
// tracking-plan figures, bench/scenarios/plans.mjs, the `plans` section), --backup
// [--backup-events N] (only tally backup and restore, bench/scenarios/backup.mjs, the `backup` section),
// --one-key (one ingest key alone: closed-loop throughput at the default and at lifted limits
// against the same run's database ceiling, then open-loop latency at 50, 80 and 95 % of that peak,
// bench/scenarios/one-key.mjs, the `oneKey` section), --sdk-formats (Segment and PostHog batches
// against native ones, bench/scenarios/sdk-formats.mjs, the `sdkFormats` section), --dedup-window
// (the dedup table at a 7- and a 30-day window, bench/scenarios/dedup-window.mjs, the `dedupWindow` section),
// --write-copy (the service's unnest statement against claims and a binary COPY of the stored columns,
// bench/scenarios/write-copy.mjs, the `writeCopy` section),
// --citus (ingest on the Citus cluster of CITUS_COORDINATOR_URL against a plain PostgreSQL,
// bench/scenarios/citus.mjs, the `citus` section),
// --insights [--insights-events N --insights-users N --insights-days N] (only exact active users and
// breakdowns, bench/scenarios/insights.mjs, the `insights` section; --insights-recompute: the rollup
// task's recompute with and without them, the `insightsRecompute` section).
//
// Each scenario lives in bench/scenarios/; this file only runs them in order and writes the results.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stop as stopCluster } from '../src/database/embedded-pg.mjs';
import { connect, withDatabase } from './lib/db.mjs';
import { evaluateTargets, renderSummary } from './lib/report.mjs';
import {
  ROOT,
  BENCH,
  CACHE,
  flags,
  QUICK,
  INGEST_ONLY,
  PLAN,
  started,
  log,
  correctness,
  git,
  snapshotDist,
  startCluster,
} from './lib/common.mjs';
import { ingestPhase } from './scenarios/ingest.mjs';
import { httpCeilingPhase } from './scenarios/http-ceiling.mjs';
import { readsPhase } from './scenarios/reads.mjs';
import { validationPhase } from './scenarios/validation.mjs';
import { budgetOf } from './scenarios/budget.mjs';
import { robustnessMode } from './scenarios/robustness.mjs';
import { pairMode } from './scenarios/pair.mjs';
import { nameBoundMode } from './scenarios/name-bound.mjs';

async function main() {
  // CPU per event of the name bound, in this process: no database, no server.
  if (flags['name-bound']) return nameBoundMode();
  fs.mkdirSync(CACHE, { recursive: true });
  fs.mkdirSync(path.join(BENCH, 'results'), { recursive: true });
  const dist = await snapshotDist();
  const cluster = await startCluster();
  const admin = await connect(withDatabase(cluster.url, 'postgres'));
  const pgVersion = (await admin.query('SHOW server_version')).rows[0].server_version;
  await admin.end();
  log(`PostgreSQL ${pgVersion} in ${cluster.dir}`);
  if (flags.pair) {
    try {
      await pairMode({ dist, cluster });
    } finally {
      if (!flags['keep-pg']) await stopCluster(cluster.dir);
      fs.rmSync(dist, { recursive: true, force: true });
    }
    return correctness.every((c) => c.pass) ? 0 : 1;
  }
  // The modes that run alone on the cluster and write their own section of the results.
  const standalone = {
    dist,
    cluster,
    quick: QUICK,
    log,
    stopCluster,
    resultsDir: path.join(BENCH, 'results'),
  };
  if (flags.isolation) {
    const { isolationMode } = await import('./scenarios/isolation.mjs');
    return isolationMode({
      ...standalone,
      loadAverage: () => os.loadavg()[0],
      only: flags.attacker,
      phaseSeconds: Number(flags['phase-seconds']) || undefined,
    });
  }
  if (flags.robustness) return robustnessMode(standalone);
  if (flags['dedup-window']) {
    const { dedupWindowMode } = await import('./scenarios/dedup-window.mjs');
    return dedupWindowMode(standalone);
  }
  if (flags['write-copy']) {
    const { writeCopyMode } = await import('./scenarios/write-copy.mjs');
    return writeCopyMode(standalone);
  }
  if (flags['sdk-formats']) {
    const { sdkFormatsMode } = await import('./scenarios/sdk-formats.mjs');
    return sdkFormatsMode(standalone);
  }
  const results = {
    schema: 1,
    mode: QUICK ? 'quick' : 'full',
    timestamp: new Date().toISOString(),
    commit: git(['rev-parse', 'HEAD']),
    dirty: git(['status', '--porcelain', '--', 'src', 'migrations']) !== '',
    cores: os.cpus().length,
    machine: {
      cores: os.cpus().length,
      cpu: os.cpus()[0]?.model ?? 'unknown',
      memoryGb: Math.round(os.totalmem() / 1e9),
      node: process.version,
      platform: `${os.platform()} ${os.release()}`,
      postgres: pgVersion,
    },
    plan: PLAN,
  };
  try {
    await ingestPhase(dist, cluster, results);
    if (!INGEST_ONLY) await httpCeilingPhase(results);
    const i64 = results.ingest?.batch100_c64?.eventsPerSec;
    results.ratios = {
      ingest_vs_db_ceiling: i64 / results.dbCeiling?.rowsPerSec,
      ingest_vs_http_ceiling: i64 / results.httpCeiling?.c64?.eventsPerSec,
    };

    if (!INGEST_ONLY) await validationPhase(dist, results);

    if (!flags['skip-reads'] && !INGEST_ONLY) await readsPhase(dist, cluster, results);
  } finally {
    if (cluster.temporary) {
      await stopCluster(cluster.dir);
      fs.rmSync(cluster.dir, { recursive: true, force: true });
    } else if (!flags['keep-pg']) {
      await stopCluster(cluster.dir);
    }
    fs.rmSync(dist, { recursive: true, force: true });
  }

  results.durationSeconds = (Date.now() - started) / 1000;
  for (const name of STANDALONE_SECTIONS) results[name] = previousSection(name);
  results.targets = evaluateTargets(results);
  results.budget = budgetOf(results);
  results.correctness = correctness;
  // Only a complete, unprofiled full run is the record; anything less goes beside it.
  const partial = flags['skip-reads'] || flags.profile || INGEST_ONLY;
  const file = path.join(BENCH, 'results', QUICK ? 'quick.json' : partial ? 'partial.json' : 'latest.json');
  fs.writeFileSync(file, JSON.stringify(results, null, 2) + '\n');
  process.stdout.write(renderSummary(results) + '\n');
  process.stdout.write(`\nResults: ${path.relative(ROOT, file)}\n`);
  return correctness.every((c) => c.pass) ? 0 : 1;
}

// The figures of the modes that run alone come from their own runs; a full run keeps the last ones.
const STANDALONE_SECTIONS = [
  'cli',
  'timezones',
  'replica',
  'erasure',
  'isolation',
  'nameBound',
  'export',
  'plans',
  'backup',
  'authRefusals',
  'oneKey',
  'sdkFormats',
  'dedupWindow',
  'writeCopy',
  'citus',
  'insights',
  'insightsRecompute',
];

function previousSection(name) {
  try {
    return JSON.parse(fs.readFileSync(path.join(BENCH, 'results', 'latest.json'), 'utf8'))[name];
  } catch {
    return undefined;
  }
}

// Modes that measure one thing alone and write their own section of latest.json.
function insightsMain() {
  return import('./scenarios/insights.mjs').then((m) => m.insightsBenchmarkMain({ root: ROOT, log }));
}

const STANDALONE_MODES = {
  cli: () => import('./scenarios/cli.mjs').then((m) => m.cliBenchmarkMain({ root: ROOT, log, git })),
  replica: () =>
    import('./scenarios/replica.mjs').then((m) => m.replicaBenchmarkMain({ root: ROOT, log, git })),
  timezones: () =>
    import('./scenarios/timezones.mjs').then((m) => m.timezonesBenchmarkMain({ root: ROOT, log })),
  'noisy-neighbours': () =>
    import('./scenarios/noisy-neighbours.mjs').then((m) =>
      m.noisyNeighboursMain({ root: ROOT, log, quick: QUICK }),
    ),
  'auth-refusals': () =>
    import('./scenarios/auth-refusals.mjs').then((m) =>
      m.authRefusalsMain({ root: ROOT, log, quick: QUICK }),
    ),
  erasure: () =>
    import('./scenarios/erasure.mjs').then((m) =>
      m.erasureBenchmarkMain({ root: ROOT, log, git, scale: Number(flags['erasure-scale']) }),
    ),
  export: () => import('./scenarios/export.mjs').then((m) => m.exportBenchmarkMain({ root: ROOT, log, git })),
  plans: () => import('./scenarios/plans.mjs').then((m) => m.plansBenchmarkMain()),
  backup: () => import('./scenarios/backup.mjs').then((m) => m.backupBenchmarkMain({ root: ROOT, log, git })),
  'one-key': () => import('./scenarios/one-key.mjs').then((m) => m.oneKeyMain()),
  citus: () => import('./scenarios/citus.mjs').then((m) => m.citusBenchmarkMain({ root: ROOT, log, git })),
  insights: insightsMain,
  // Alone as well as with --insights: the recompute comparison only.
  'insights-recompute': insightsMain,
};
const mode = Object.keys(STANDALONE_MODES).find((name) => flags[name]);
const run = mode ? STANDALONE_MODES[mode] : main;
run().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`benchmark failed: ${err instanceof Error ? (err.stack ?? err.message) : err}\n`);
    process.exit(1);
  },
);
