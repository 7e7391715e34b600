import { DynamicModule, Module } from '@nestjs/common';
import type { AppConfig } from '@app/config/config';
import { ConfigModule } from '@app/config/config.module';
import { DatabaseModule } from '@app/database/database.module';
import { RateLimitModule, RateLimitStoreModule } from '@app/common/rate-limit/rate-limit.module';
import { AuthModule } from '@app/auth/auth.module';
import { RollupsModule } from '@app/rollups/rollups.module';

/** The services the admin CLI needs, without HTTP, logging or scheduled work. */
@Module({})
export class CliModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: CliModule,
      imports: [
        ConfigModule.forRoot(config),
        DatabaseModule.forRoot(config),
        RateLimitStoreModule,
        RateLimitModule,
        AuthModule,
        RollupsModule,
      ],
    };
  }
}
