import { destroy } from '../../src/database/embedded-pg.mjs';

export default async function globalTeardown() {
  const dir = process.env.TALLY_TEST_PG_DIR;
  if (!dir) return;
  await destroy(dir);
}
