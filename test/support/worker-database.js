// Loaded by jest (setupFiles) before each test file: points the file at its worker's own
// database in the run's embedded cluster (created by global-setup.mjs). A run against a given
// TEST_DATABASE_URL (the Citus suites) keeps that one database, and runs in band.

/** The name of jest worker `worker`'s database. */
function workerDatabase(worker) {
  return `tally_w${worker}`;
}

if (process.env.TALLY_TEST_WORKER_DATABASES && process.env.TALLY_TEST_DATABASE_URL) {
  const url = new URL(process.env.TALLY_TEST_DATABASE_URL);
  url.pathname = `/${workerDatabase(process.env.JEST_WORKER_ID ?? '1')}`;
  process.env.TALLY_TEST_DATABASE_URL = url.toString();
}

module.exports = { workerDatabase };
