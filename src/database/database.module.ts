import { DynamicModule, Module } from '@nestjs/common';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import type { AppConfig } from '@app/config/config';
import { dataSourceOptions, DataSourceSettings } from './data-source';
import { FixedReadDatabase, ReadDatabase, ReplicaReadDatabase } from './read-database';
import { WritePressure } from './write-pressure';
import { CitusCluster } from './citus';

/** The name of the primary's DataSource for the read endpoints (see ReadDatabase for the replica). */
export const READ_DATA_SOURCE = 'read';

const CLI_POOL_SIZE = 2;

@Module({})
export class DatabaseModule {
  static forRoot(config: AppConfig): DynamicModule {
    if (!config.databaseUrl) throw new Error('DatabaseModule needs a resolved database URL');
    const primary = {
      url: config.databaseUrl,
      poolSize: config.databasePoolSize,
      statementTimeoutMs: config.databaseStatementTimeoutMs,
    };
    const read: DataSourceSettings = {
      ...primary,
      applicationName: 'tally-read',
      // Its own pool, so that this shorter timeout never touches ingest or the rollup task.
      statementTimeoutMs: config.readStatementTimeoutMs,
      // One read runs on one core: a parallel scan would let a single tenant's read take
      // every core of the database for its duration.
      maxParallelWorkers: 0,
    };
    const replicaUrl = config.databaseReadUrl;
    return {
      module: DatabaseModule,
      // ReadDatabase, WritePressure and CitusCluster, like TypeORM's DataSources, are reachable from every
      // feature module.
      global: true,
      imports: [
        TypeOrmModule.forRoot({ ...dataSourceOptions(primary), autoLoadEntities: true }),
        TypeOrmModule.forRoot({ ...dataSourceOptions(read), name: READ_DATA_SOURCE, autoLoadEntities: true }),
      ],
      providers: [
        { provide: WritePressure, useValue: new WritePressure() },
        {
          provide: CitusCluster,
          inject: [getDataSourceToken()],
          useFactory: (db: DataSource): Promise<CitusCluster> => CitusCluster.detect(db),
        },
        {
          provide: ReadDatabase,
          inject: [getDataSourceToken(READ_DATA_SOURCE)],
          useFactory: (primaryRead: DataSource): ReadDatabase =>
            replicaUrl && replicaUrl !== config.databaseUrl
              ? new ReplicaReadDatabase(primaryRead, {
                  primaryUrl: primary.url,
                  replica: { ...read, url: replicaUrl, applicationName: 'tally-read-replica' },
                  maxLagMs: config.readMaxLagMs,
                  returnAfterChecks: config.readReturnChecks,
                })
              : new FixedReadDatabase(primaryRead),
        },
      ],
      exports: [TypeOrmModule, ReadDatabase, WritePressure, CitusCluster],
    };
  }
  /**
   * The admin CLI's database: one small pool on the primary, which its reads use too, and no
   * retries (a command fails at once when the database is unreachable).
   */
  static forCli(config: AppConfig): DynamicModule {
    if (!config.databaseUrl) throw new Error('DatabaseModule needs a resolved database URL');
    const settings: DataSourceSettings = {
      url: config.databaseUrl,
      poolSize: CLI_POOL_SIZE,
      statementTimeoutMs: config.databaseStatementTimeoutMs,
      applicationName: 'tally-cli',
    };
    return {
      module: DatabaseModule,
      global: true,
      imports: [
        TypeOrmModule.forRoot({ ...dataSourceOptions(settings), autoLoadEntities: true, retryAttempts: 0 }),
      ],
      providers: [
        { provide: WritePressure, useValue: new WritePressure() },
        {
          provide: ReadDatabase,
          inject: [getDataSourceToken()],
          useFactory: (primary: DataSource): ReadDatabase => new FixedReadDatabase(primary),
        },
        { provide: getDataSourceToken(READ_DATA_SOURCE), useExisting: getDataSourceToken() },
        // On a Citus coordinator the CLI's writes (a quarantine replay) take the same one-worker path.
        {
          provide: CitusCluster,
          inject: [getDataSourceToken()],
          useFactory: (db: DataSource): Promise<CitusCluster> => CitusCluster.detect(db),
        },
      ],
      exports: [
        TypeOrmModule,
        ReadDatabase,
        WritePressure,
        CitusCluster,
        getDataSourceToken(READ_DATA_SOURCE),
      ],
    };
  }
}
