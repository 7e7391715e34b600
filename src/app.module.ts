import { DynamicModule, Module } from '@nestjs/common';
import { LoggerModule } from 'nestjs-pino';
import { ScheduleModule } from '@nestjs/schedule';
import type { AppConfig } from './config/config';
import { ConfigModule } from './config/config.module';
import { DatabaseModule } from './database/database.module';
import { RateLimitModule, RateLimitStoreModule } from './common/rate-limit/rate-limit.module';
import { loggerOptions } from './common/logger';
import { AuthModule } from './auth/auth.module';
import { KeyRevocationModule } from './auth/key-revocation.module';
import { IngestModule } from './ingest/ingest.module';
import { EventsModule } from './events/events.module';
import { RollupsModule } from './rollups/rollups.module';
import { OpsModule } from './ops/ops.module';

@Module({})
export class AppModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ConfigModule.forRoot(config),
        LoggerModule.forRoot(loggerOptions(config)),
        DatabaseModule.forRoot(config),
        ScheduleModule.forRoot(),
        RateLimitStoreModule,
        RateLimitModule,
        AuthModule,
        KeyRevocationModule,
        IngestModule,
        EventsModule,
        RollupsModule,
        OpsModule,
      ],
    };
  }
}
