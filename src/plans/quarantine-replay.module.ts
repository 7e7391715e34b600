import { Module } from '@nestjs/common';
import { AuthCoreModule } from '@app/auth/auth-core.module';
import { IngestCoreModule } from '@app/ingest/ingest-core.module';
import { PlansCoreModule } from './plans-core.module';
import { QuarantineReplayService } from './quarantine-replay.service';

/**
 * The quarantine's replay, which writes through ingest's insert statement: what the service and
 * the admin CLI share. Apart from PlansCoreModule, so that the erasure's context holds no ingest.
 */
@Module({
  imports: [AuthCoreModule, PlansCoreModule, IngestCoreModule],
  providers: [QuarantineReplayService],
  exports: [QuarantineReplayService],
})
export class QuarantineReplayModule {}
