import type { AppConfig } from '@app/config/config';
import { attachEmbeddedDatabase } from './embedded';
import { createDataSource } from './data-source';
import { runMigrations } from './migrate';

export interface PreparedDatabase {
  config: AppConfig;
  /** Detaches from the embedded database (no-op for an external one). */
  release(): Promise<void>;
  migrationsApplied: string[];
}

/**
 * Resolves the database before Nest starts: attaches to (or starts) the embedded PostgreSQL
 * when DATABASE_URL is unset, then applies pending migrations unless MIGRATIONS_RUN=false.
 * `createCluster: false` (the CLI) refuses a folder that holds no cluster yet.
 */
export async function prepareDatabase(
  config: AppConfig,
  options: { migrate?: boolean; createCluster?: boolean } = {},
): Promise<PreparedDatabase> {
  let release = async () => undefined as void;
  let resolved = config;
  if (!config.databaseUrl) {
    const embedded = await attachEmbeddedDatabase(config.embeddedPgDir, config.embeddedPgPort, {
      create: options.createCluster ?? true,
    });
    release = () => embedded.release();
    resolved = { ...config, databaseUrl: embedded.url };
  }
  let migrationsApplied: string[] = [];
  if (options.migrate ?? config.migrationsRun) {
    const dataSource = createDataSource({
      url: resolved.databaseUrl!,
      poolSize: 2,
      applicationName: 'tally-migrate',
    });
    await dataSource.initialize();
    try {
      migrationsApplied = await runMigrations(dataSource);
    } finally {
      await dataSource.destroy();
    }
  }
  return { config: resolved, release, migrationsApplied };
}
