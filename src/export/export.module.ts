import { Module } from '@nestjs/common';
import { AuthModule } from '@app/auth/auth.module';
import { RateLimitModule } from '@app/common/rate-limit/rate-limit.module';
import { ExportController } from './export.controller';
import { ExportCoreModule } from './export-core.module';

@Module({
  imports: [ExportCoreModule, AuthModule, RateLimitModule],
  controllers: [ExportController],
  exports: [ExportCoreModule],
})
export class ExportModule {}
