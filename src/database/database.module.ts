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
          }),
          name: READ_DATA_SOURCE,
          autoLoadEntities: true,
        }),
      ],
      exports: [TypeOrmModule],
    };
  }
}
