// Starts one embedded PostgreSQL for the whole test run, on a free port in a temporary folder,
// and hands its URL to the test workers through the environment. Each worker gets a database
// of its own in that cluster (test/support/worker-database.js), so that files running at the
// same time never see each other's apps, rollup runs or locks.
import pg from 'pg';
import { ensure, makeTemporaryDir } from '../../src/database/embedded-pg.mjs';
import { freePort } from './harness.js';
import { workerDatabase } from './worker-database.js';

export default async function globalSetup(globalConfig) {
  if (process.env.TEST_DATABASE_URL) {
    process.env.TALLY_TEST_DATABASE_URL = process.env.TEST_DATABASE_URL;
    return;
  }
  const dir = await makeTemporaryDir('test');
  const { url } = await ensure(dir, await freePort());
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    for (let worker = 1; worker <= Math.max(1, globalConfig.maxWorkers); worker++) {
      await admin.query(`CREATE DATABASE ${workerDatabase(worker)}`);
    }
  } finally {
    await admin.end();
  }
  process.env.TALLY_TEST_DATABASE_URL = url;
  process.env.TALLY_TEST_PG_DIR = dir;
  process.env.TALLY_TEST_WORKER_DATABASES = '1';
}
