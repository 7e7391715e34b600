import { Module } from '@nestjs/common';
import { ReadsModule } from '@app/common/reads/reads.module';
import { ExportRepository } from './export.repository';
import { ExportService } from './export.service';

/** The export's reading and encoding, without HTTP: shared with the admin CLI's `export`. */
@Module({
  imports: [ReadsModule],
  providers: [ExportRepository, ExportService],
  exports: [ExportService],
})
export class ExportCoreModule {}
