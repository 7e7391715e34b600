import { Module } from '@nestjs/common';
import { ReadsModule } from '@app/common/reads/reads.module';
import { RollupComputationRepository } from './rollup-computation.repository';
import { RollupRepository } from './rollup.repository';
import { RollupsService } from './rollups.service';
import { RezoneRepository } from './rezone.repository';
import { RezoneService } from './rezone.service';
import { RollupSteps } from './rollup-steps';

/** The rollup computation and its reads, without HTTP or the schedule: shared with the admin CLI. */
@Module({
  imports: [ReadsModule],
  providers: [
    RollupSteps,
    RollupRepository,
    RollupComputationRepository,
    RezoneRepository,
    RezoneService,
    RollupsService,
  ],
  // RollupSteps: other features add their steps to the computation (insights).
  exports: [RollupsService, RollupSteps],
})
export class RollupsCoreModule {}
