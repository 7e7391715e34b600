// Starts one embedded PostgreSQL for the whole test run, on a free port in a temporary folder,
// and hands its URL to the test workers through the environment.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ensure } from '../../src/database/embedded-pg.mjs';
import { freePort } from './free-port.mjs';

export default async function globalSetup() {
  if (process.env.TEST_DATABASE_URL) {
    process.env.TALLY_TEST_DATABASE_URL = process.env.TEST_DATABASE_URL;
    return;
  }
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tally-test-'));
  await fs.chmod(dir, 0o755);
  const { url } = await ensure(dir, await freePort());
  process.env.TALLY_TEST_DATABASE_URL = url;
  process.env.TALLY_TEST_PG_DIR = dir;
}
