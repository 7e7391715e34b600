// Shared state of one benchmark run: paths, flags, the plan of sizes, logging and the checks.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ensure, makeTemporaryDir } from '../../src/database/embedded-pg.mjs';
import { freePort } from './processes.mjs';

// Here for the scenarios that import them with the run's state; they live beside the CLI runner.
export { ingestHeaders, makeTenant } from './processes.mjs';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const BENCH = path.join(ROOT, 'bench');
export const CACHE = path.join(BENCH, '.cache');
export const READS_DATASET_VERSION = 2;

export const { values: flags } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    'skip-reads': { type: 'boolean', default: false },
    'keep-pg': { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    cli: { type: 'boolean', default: false },
    // App time zones alone (bench/scenarios/timezones.mjs), the `timezones` section.
    timezones: { type: 'boolean', default: false },
    'tz-events': { type: 'string' },
    // Erasure of a heavy user (bench/scenarios/erasure.mjs); --erasure-scale shrinks its dataset.
    erasure: { type: 'boolean', default: false },
    'erasure-scale': { type: 'string', default: '1' },
    // Exact active users and breakdowns alone (bench/scenarios/insights.mjs), the `insights` section.
    insights: { type: 'boolean', default: false },
    'insights-events': { type: 'string' },
    'insights-users': { type: 'string' },
    'insights-days': { type: 'string' },
    'insights-recompute': { type: 'boolean', default: false },
    // 1: the recompute comparison runs each variant once instead of twice.
    'insights-passes': { type: 'string' },
    // Reads on a hot standby against reads on the primary (bench/scenarios/replica.mjs).
    replica: { type: 'boolean', default: false },
    // The raw export alone (bench/scenarios/export.mjs), recorded in the `export` section.
    export: { type: 'boolean', default: false },
    'export-events': { type: 'string' },
    // tally backup and tally restore alone (bench/scenarios/backup.mjs), the `backup` section.
    backup: { type: 'boolean', default: false },
    // Ingest on a Citus cluster against a plain PostgreSQL (bench/scenarios/citus.mjs), the `citus` section.
    citus: { type: 'boolean', default: false },
    'backup-events': { type: 'string' },
    'backup-pause': { type: 'string' },
    // Tracking plans only (bench/scenarios/plans.mjs), recorded in the `plans` section of latest.json.
    plans: { type: 'boolean', default: false },
    robustness: { type: 'boolean', default: false },
    // Segment and PostHog wire formats against native batches (bench/scenarios/sdk-formats.mjs).
    'sdk-formats': { type: 'boolean', default: false },
    // The dedup table's size and claim cost at a 7- and a 30-day window (bench/scenarios/dedup-window.mjs).
    'dedup-window': { type: 'boolean', default: false },
    // The service's unnest statement against claims + binary COPY (bench/scenarios/write-copy.mjs).
    'write-copy': { type: 'boolean', default: false },
    // Victim latency under a hostile ingest key (bench/scenarios/isolation.mjs), section `isolation`.
    isolation: { type: 'boolean', default: false },
    // With --isolation: only this attacker of isolation-attackers.mjs beside the victim (a quick
    // look at one lever; the figures are printed, not recorded).
    attacker: { type: 'string' },
    // With --attacker: each phase's length in seconds (default 45, as in the whole run).
    'phase-seconds': { type: 'string' },
    // One key's expensive reads or stalled uploads against another app (noisy-neighbours.mjs).
    'noisy-neighbours': { type: 'boolean', default: false },
    // Whether a refused key's answer time tells the kind of refusal (auth-refusals.mjs).
    'auth-refusals': { type: 'boolean', default: false },
    'ingest-only': { type: 'boolean', default: false },
    // One ingest key alone, closed and open loop (bench/scenarios/one-key.mjs), section `oneKey`.
    'one-key': { type: 'boolean', default: false },
    // The ingest cost of the event-name bound alone (bench/scenarios/name-bound.mjs).
    'name-bound': { type: 'boolean', default: false },
    // Paired A/B of two builds (bench/scenarios/pair.mjs).
    pair: { type: 'boolean', default: false },
    a: { type: 'string' },
    b: { type: 'string' },
    rounds: { type: 'string' },
    'env-a': { type: 'string', multiple: true },
    'env-b': { type: 'string', multiple: true },
    'sql-a': { type: 'string', multiple: true },
    'sql-b': { type: 'string', multiple: true },
  },
});
export const QUICK = flags.quick;
// --ingest-only: the warm-up and the two 100-event runs, nothing else (a quick A/B of the hot path).
export const INGEST_ONLY = flags['ingest-only'];

// Sizes of everything. The full run targets about 10 s per load run; the quick run only has to
// prove that the harness and the correctness checks work.
export const PLAN = QUICK
  ? {
      loadSeconds: 1.5,
      maxLoadSeconds: 20,
      warmupRequests: 40,
      dbCeilingSeconds: 1,
      validationEvents: 20_000,
      reads: { apps: 5, total: 30_000, bigCount: 20_000, days: 30, requests: 20 },
      incrementalEvents: 1_000,
      filteredReads: { dayEvents: 20_000, seconds: 3, minReads: 5 },
    }
  : {
      loadSeconds: 10,
      maxLoadSeconds: 45,
      warmupRequests: 400,
      dbCeilingSeconds: 10,
      validationEvents: 400_000,
      reads: { apps: 50, total: 5_000_000, bigCount: 2_000_000, days: 30, requests: 200 },
      incrementalEvents: 10_000,
      filteredReads: { dayEvents: 2_000_000, seconds: 20, minReads: 8 },
    };

export const started = Date.now();
export const log = (msg) =>
  process.stderr.write(`[bench ${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s] ${msg}\n`);
export const correctness = [];
export function check(name, pass, detail) {
  correctness.push({ check: name, pass: Boolean(pass), detail });
  if (!pass) log(`CHECK FAILED: ${name}: ${detail}`);
}

export function git(args) {
  try {
    return execFileSync('git', args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'ignore'] })
      .toString()
      .trim();
  } catch {
    return '';
  }
}

/**
 * Runs the benchmark against a private copy of dist/, so that a rebuild in the working tree while
 * the benchmark runs cannot swap code under the server or the CLI halfway through.
 */
export async function snapshotDist() {
  const source = path.join(ROOT, 'dist');
  const target = path.join(CACHE, `dist-${process.pid}`);
  const needed = [
    'src/main.js',
    'src/cli/main.js',
    'src/cli/services.js',
    'src/config/config.js',
    'src/database/prepare.js',
    'src/database/embedded-pg.mjs',
    'src/rollups/rollups.service.js',
  ];
  // A build that someone else started may be half-written; wait for a complete one.
  for (let attempt = 0; ; attempt++) {
    fs.rmSync(target, { recursive: true, force: true });
    try {
      fs.cpSync(source, target, { recursive: true });
    } catch {
      /* dist changed while it was copied */
    }
    const missing = needed.filter((f) => !fs.existsSync(path.join(target, f)));
    if (!missing.length) return target;
    if (attempt === 20) throw new Error(`dist/ is incomplete (${missing.join(', ')}): run \`npm run build\``);
    await new Promise((r) => setTimeout(r, 3000));
  }
}

export async function startCluster() {
  if (QUICK) {
    const dir = await makeTemporaryDir('bench');
    const { url } = await ensure(dir, await freePort());
    return { dir, url, temporary: true };
  }
  const dir = path.join(CACHE, 'pg');
  const { url } = await ensure(dir, await freePort());
  return { dir, url, temporary: false };
}

/**
 * The end of a standalone mode: stops its cluster, removes the cluster when it was temporary
 * (--quick) and the snapshot of the build.
 */
export async function releaseStandalone({ dist, cluster, stopCluster }) {
  await stopCluster(cluster.dir).catch(() => undefined);
  if (cluster.temporary) fs.rmSync(cluster.dir, { recursive: true, force: true });
  fs.rmSync(dist, { recursive: true, force: true });
}
