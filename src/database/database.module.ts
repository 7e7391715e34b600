import { DynamicModule, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import type { AppConfig } from '@app/config/config';
import { dataSourceOptions } from './data-source';

/** The name of the DataSource that serves the read endpoints (a replica when configured). */
export const READ_DATA_SOURCE = 'read';

@Module({})
export class DatabaseModule {
  static forRoot(config: AppConfig): DynamicModule {
    if (!config.databaseUrl) throw new Error('DatabaseModule needs a resolved database URL');
    const primary = {
      url: config.databaseUrl,
      poolSize: config.databasePoolSize,
      statementTimeoutMs: config.databaseStatementTimeoutMs,
    };
    return {
      module: DatabaseModule,
      imports: [
        TypeOrmModule.forRoot({ ...dataSourceOptions(primary), autoLoadEntities: true }),
        TypeOrmModule.forRoot({
          ...dataSourceOptions({
            ...primary,
            url: config.databaseReadUrl ?? config.databaseUrl,
            applicationName: 'tally-read',
            // Its own pool, so that this shorter timeout never touches ingest or the rollup task.
            statementTimeoutMs: config.readStatementTimeoutMs,
            // One read runs on one core: a parallel scan would let a single tenant's read take
            // every core of the database for its duration.
            maxParallelWorkers: 0,
          }),
          name: READ_DATA_SOURCE,
          autoLoadEntities: true,
        }),
      ],
      exports: [TypeOrmModule],
    };
  }
}
