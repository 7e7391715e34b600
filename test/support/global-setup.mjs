// Starts one embedded PostgreSQL for the whole test run, on a free port in a temporary folder,
// and hands its URL to the test workers through the environment.
import { ensure, makeTemporaryDir } from '../../src/database/embedded-pg.mjs';
import { freePort } from './harness.js';

export default async function globalSetup() {
  if (process.env.TEST_DATABASE_URL) {
    process.env.TALLY_TEST_DATABASE_URL = process.env.TEST_DATABASE_URL;
    return;
  }
  const dir = await makeTemporaryDir('test');
  const { url } = await ensure(dir, await freePort());
  process.env.TALLY_TEST_DATABASE_URL = url;
  process.env.TALLY_TEST_PG_DIR = dir;
}
