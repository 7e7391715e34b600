import { Module } from '@nestjs/common';
import { AuthModule } from '@app/auth/auth.module';
import { RateLimitModule } from '@app/common/rate-limit/rate-limit.module';
import { ExportController } from './export.controller';
import { ExportRepository } from './export.repository';
import { ExportService } from './export.service';
import { CursorSecretRepository } from '@app/common/reads/cursor-secret.repository';

@Module({
  imports: [AuthModule, RateLimitModule],
  controllers: [ExportController],
  providers: [ExportRepository, ExportService, CursorSecretRepository],
  exports: [ExportService],
})
export class ExportModule {}
