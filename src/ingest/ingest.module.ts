import { Module } from '@nestjs/common';
import { AuthModule } from '@app/auth/auth.module';
import { IngestController } from './ingest.controller';
import { IngestBodyReader } from './ingest-body.reader';
import { IngestRepository } from './ingest.repository';
import { IngestService } from './ingest.service';
import { IngestWriter } from './ingest-writer';

@Module({
  imports: [AuthModule],
  controllers: [IngestController],
  providers: [IngestBodyReader, IngestService, IngestWriter, IngestRepository],
})
export class IngestModule {}
