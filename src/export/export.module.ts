import { Module } from '@nestjs/common';
import { AuthModule } from '@app/auth/auth.module';
import { RateLimitModule } from '@app/common/rate-limit/rate-limit.module';
import { ExportController } from './export.controller';
import { ExportRepository } from './export.repository';
import { ExportService } from './export.service';
import { ReadsModule } from '@app/common/reads/reads.module';

@Module({
  imports: [ReadsModule, AuthModule, RateLimitModule],
  controllers: [ExportController],
  providers: [ExportRepository, ExportService],
  exports: [ExportService],
})
export class ExportModule {}
