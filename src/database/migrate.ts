import { DataSource } from 'typeorm';

import { ADVISORY_LOCKS } from './advisory-locks';

const MIGRATION_LOCK_ID = ADVISORY_LOCKS.migrations;

/**
 * Applies pending migrations under a session-level advisory lock, so that several instances
 * (or the CLI and a server) starting together apply each migration exactly once.
 * Returns the names of the migrations applied.
 */
export async function runMigrations(dataSource: DataSource): Promise<string[]> {
  const runner = dataSource.createQueryRunner();
  await runner.connect();
  try {
    await runner.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_ID]);
    const applied = await dataSource.runMigrations({ transaction: 'each' });
    return applied.map((m) => m.name);
  } finally {
    await runner.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_ID]).catch(() => undefined);
    await runner.release();
  }
}
