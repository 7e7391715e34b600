import { DynamicModule, Module } from '@nestjs/common';
import { LoggerModule } from 'nestjs-pino';
import type { DestinationStream } from 'pino';
import { ScheduleModule } from '@nestjs/schedule';
import type { AppConfig } from './config/config';
import { ConfigModule } from './config/config.module';
import { DatabaseModule } from './database/database.module';
import { loggerOptions } from './common/logger';
import { AuditModule } from './audit/audit.module';
import { AuthModule } from './auth/auth.module';
import { KeyRevocationModule } from './auth/key-revocation.module';
import { IngestModule } from './ingest/ingest.module';
import { IngestPlansModule } from './plans/ingest-plans.adapter';
import { PlansModule } from './plans/plans.module';
import { EventsModule } from './events/events.module';
import { ExportModule } from './export/export.module';
import { RollupsModule } from './rollups/rollups.module';
import { InsightsModule } from './insights/insights.module';
import { OpsModule } from './ops/ops.module';
import { StorageModule } from './storage/storage.module';
import { PrivacyModule } from './privacy/privacy.module';
import { SdkFormatsModule } from './sdk-formats/sdk-formats.module';

export interface AppOptions {
  /** Where the log lines go instead of stdout. */
  logDestination?: DestinationStream;
}
import { DashboardModule } from './dashboard/dashboard.module';

@Module({})
export class AppModule {
  static forRoot(config: AppConfig, options: AppOptions = {}): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ConfigModule.forRoot(config),
        LoggerModule.forRoot(loggerOptions(config, options.logDestination)),
        DatabaseModule.forRoot(config),
        ScheduleModule.forRoot(),
        AuditModule,
        AuthModule,
        KeyRevocationModule,
        IngestModule,
        IngestPlansModule,
        PlansModule,
        SdkFormatsModule,
        EventsModule,
        ExportModule,
        StorageModule,
        RollupsModule,
        InsightsModule,
        OpsModule,
        PrivacyModule,
        ...(config.dashboardEnabled ? [DashboardModule] : []),
      ],
    };
  }
}
