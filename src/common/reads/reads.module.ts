import { Module } from '@nestjs/common';
import { CursorSecretRepository } from './cursor-secret.repository';

/** The signing secret of every paged listing's cursor, one instance shared by the modules that page. */
@Module({
  providers: [CursorSecretRepository],
  exports: [CursorSecretRepository],
})
export class ReadsModule {}
