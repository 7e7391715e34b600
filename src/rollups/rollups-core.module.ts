import { Module } from '@nestjs/common';
import { ReadsModule } from '@app/common/reads/reads.module';
import { RollupComputationRepository } from './rollup-computation.repository';
import { RollupRepository } from './rollup.repository';
import { RollupsService } from './rollups.service';
import { RezoneRepository } from './rezone.repository';
import { RezoneService } from './rezone.service';

/** The rollup computation and its reads, without HTTP or the schedule: shared with the admin CLI. */
@Module({
  imports: [ReadsModule],
  providers: [RollupRepository, RollupComputationRepository, RezoneRepository, RezoneService, RollupsService],
  exports: [RollupsService],
})
export class RollupsCoreModule {}
