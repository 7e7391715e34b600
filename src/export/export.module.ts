import { Module } from '@nestjs/common';
import { AuthModule } from '@app/auth/auth.module';
import { RateLimitModule } from '@app/common/rate-limit/rate-limit.module';
import { ExportController } from './export.controller';
import { ExportRepository } from './export.repository';
import { ExportService } from './export.service';

@Module({
  imports: [AuthModule, RateLimitModule],
  controllers: [ExportController],
  providers: [ExportRepository, ExportService],
  exports: [ExportService],
})
export class ExportModule {}
