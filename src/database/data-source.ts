import { DataSource, DataSourceOptions } from 'typeorm';
import { MIGRATIONS } from '@migrations/index';

export interface DataSourceSettings {
  url: string;
  poolSize?: number;
  statementTimeoutMs?: number;
  applicationName?: string;
  /** PostgreSQL `max_parallel_workers_per_gather` of the pool's sessions; unset: the server's. */
  maxParallelWorkers?: number;
  /** Entities for a DataSource built outside Nest (the CLI); the service gets them from its modules. */
  entities?: DataSourceOptions['entities'];
}

/**
 * The one place a TypeORM DataSource is described. The service, the CLI, the migration runner,
 * the tests and the benchmark all build theirs here.
 */
export function dataSourceOptions(settings: DataSourceSettings): DataSourceOptions {
  return {
    type: 'postgres',
    url: settings.url,
    // In the service, entities come from the feature modules (TypeOrmModule.forFeature +
    // autoLoadEntities); migrations and raw queries need none.
    entities: settings.entities ?? [],
    migrations: MIGRATIONS,
    migrationsTableName: 'migrations',
    migrationsTransactionMode: 'each',
    synchronize: false,
    logging: false,
    poolSize: settings.poolSize ?? 10,
    extra: {
      application_name: settings.applicationName ?? 'tally',
      statement_timeout: settings.statementTimeoutMs ?? 30_000,
      ...(settings.maxParallelWorkers === undefined
        ? {}
        : { options: `-c max_parallel_workers_per_gather=${settings.maxParallelWorkers}` }),
      // Fail fast when the database is unreachable, so that callers get a 503 quickly.
      connectionTimeoutMillis: 5_000,
      idleTimeoutMillis: 30_000,
    },
  };
}

export function createDataSource(settings: DataSourceSettings): DataSource {
  return new DataSource(dataSourceOptions(settings));
}
