import { Module } from '@nestjs/common';
import { AuthModule } from '@app/auth/auth.module';
import { IngestController } from './ingest.controller';

@Module({
  imports: [AuthModule],
  controllers: [IngestController],
})
export class IngestModule {}
