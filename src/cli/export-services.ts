import type { DataSource } from 'typeorm';
import { CursorSecretRepository } from '@app/common/reads/cursor-secret.repository';
import type { AppConfig } from '@app/config/config';
import { FixedReadDatabase } from '@app/database/read-database';
import { ExportRepository } from '@app/export/export.repository';
import { ExportService } from '@app/export/export.service';

/** The export service of the `export` command: it reads the database directly. */
export function buildExports(dataSource: DataSource, config: AppConfig): ExportService {
  // The CLI reads the primary.
  return new ExportService(
    config,
    new ExportRepository(new FixedReadDatabase(dataSource)),
    new CursorSecretRepository(dataSource),
  );
}
