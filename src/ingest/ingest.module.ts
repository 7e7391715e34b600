import { Module } from '@nestjs/common';
import { AuthModule } from '@app/auth/auth.module';
import { IngestController } from './ingest.controller';
import { IngestBodyReader } from './ingest-body.reader';
import { IngestRepository } from './ingest.repository';
import { IngestService } from './ingest.service';

@Module({
  imports: [AuthModule],
  controllers: [IngestController],
  providers: [IngestBodyReader, IngestService, IngestRepository],
})
export class IngestModule {}
