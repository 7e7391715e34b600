// npm run test:citus: Tally's data paths on a Citus cluster. With CITUS_COORDINATOR_URL naming a
// coordinator database (the citus extension created in it on the coordinator and every worker,
// the workers added with citus_add_node), runs the end-to-end suites that store and read data
// against it, then the checks only Citus can answer (test/citus/citus.citus-spec.ts). Without it,
// says so and exits 0: CI has no Citus. docs/scaling.md says how to make such a cluster.
//
// Optional: CITUS_WORKER_PGDATA, the data folder of one worker on this host, which the checks stop
// with `pg_ctl -m immediate` under load and start again (CITUS_PG_CTL, default PostgreSQL 15's;
// CITUS_PG_OS_USER, the OS user that owns the cluster when this runs as root, default postgres).
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

// The suites whose tests store, read, erase or export data through the service. Not here:
// test/storage-lookups.e2e-spec.ts, which reads the plans and BRIN summaries of the server's own
// partitions (on Citus those are the coordinator's empty shells; the shards' upkeep is checked in
// test/citus/citus.citus-spec.ts).
const SUITES = [
  'test/ingest.e2e-spec.ts',
  'test/ingest-group-commit.e2e-spec.ts',
  'test/ingest-commit-horizon.e2e-spec.ts',
  'test/ingest-partition.e2e-spec.ts',
  'test/metering.e2e-spec.ts',
  'test/event-ids.e2e-spec.ts',
  'test/events.e2e-spec.ts',
  'test/rollups.e2e-spec.ts',
  'test/rollups-paging.e2e-spec.ts',
  'test/timezones.e2e-spec.ts',
  'test/export.e2e-spec.ts',
  'test/privacy.e2e-spec.ts',
  'test/privacy-timezone.e2e-spec.ts',
  'test/privacy-quarantine.e2e-spec.ts',
  'test/deletion-feed.e2e-spec.ts',
  'test/app-lifecycle.e2e-spec.ts',
  'test/plans.e2e-spec.ts',
  'test/quarantine-bounds.e2e-spec.ts',
  'test/retention.e2e-spec.ts',
  'test/audit.e2e-spec.ts',
  'test/revocation.e2e-spec.ts',
  'test/key-info.e2e-spec.ts',
  'test/insights.e2e-spec.ts',
  'test/insights-lifecycle.e2e-spec.ts',
  'test/insight-day-sources.e2e-spec.ts',
  'test/insight-day-increments.e2e-spec.ts',
  'test/sdk-formats.e2e-spec.ts',
];

// Tests of a single node's own mechanics, left out here: this one locks `rollups` on the server
// and kills the backend that waits for it, where on Citus the wait happens on a worker.
const SINGLE_NODE_TESTS = ['a run killed halfway leaves its marks'];
const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const skipSingleNode = `^(?!.*(${SINGLE_NODE_TESTS.map(escape).join('|')})).*$`;

const url = process.env.CITUS_COORDINATOR_URL;
if (!url) {
  process.stdout.write(
    'test:citus skipped: CITUS_COORDINATOR_URL is not set (a Citus coordinator database with its ' +
      'workers added; see docs/scaling.md, step 5).\n',
  );
  process.exit(0);
}

const built = spawnSync('npm', ['run', 'build'], {
  cwd: ROOT,
  stdio: ['ignore', 'ignore', 'inherit'],
}).status;
if (built !== 0) {
  process.stdout.write('test:citus: npm run build failed\n');
  process.exit(1);
}

const only = process.argv.slice(2);
const jest = (args) =>
  spawnSync(process.execPath, [path.join(ROOT, 'node_modules/jest/bin/jest.js'), '--runInBand', ...args], {
    cwd: ROOT,
    stdio: 'inherit',
    env: { ...process.env, TEST_DATABASE_URL: url },
  }).status;

const suites = only.length > 0 ? SUITES.filter((s) => only.some((o) => s.includes(o))) : SUITES;
const e2e = suites.length > 0 ? jest(['-t', skipSingleNode, ...suites]) : 0;
const citus = jest(['--testMatch', '<rootDir>/test/citus/**/*.citus-spec.ts']);
process.stdout.write(
  `\ntest:citus: end-to-end suites ${e2e === 0 ? 'passed' : 'FAILED'}, Citus checks ${citus === 0 ? 'passed' : 'FAILED'}\n`,
);
process.exit(e2e === 0 && citus === 0 ? 0 : 1);
