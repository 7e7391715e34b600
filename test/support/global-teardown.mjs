import fs from 'node:fs/promises';
import { stop } from '../../src/database/embedded-pg.mjs';

export default async function globalTeardown() {
  const dir = process.env.TALLY_TEST_PG_DIR;
  if (!dir) return;
  await stop(dir);
  await fs.rm(dir, { recursive: true, force: true });
}
