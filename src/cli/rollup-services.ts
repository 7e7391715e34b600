import type { DataSource } from 'typeorm';
import { Logger } from '@nestjs/common';
import type { AuditService } from '@app/audit/audit.service';
import { CursorSecretRepository } from '@app/common/reads/cursor-secret.repository';
import type { AppConfig } from '@app/config/config';
import { FixedReadDatabase } from '@app/database/read-database';
import { RezoneRepository } from '@app/rollups/rezone.repository';
import { RezoneService } from '@app/rollups/rezone.service';
import { RollupComputationRepository } from '@app/rollups/rollup-computation.repository';
import { RollupRepository } from '@app/rollups/rollup.repository';
import { RollupsService } from '@app/rollups/rollups.service';
import { RollupSteps } from '@app/rollups/rollup-steps';
import { InsightComputationRepository } from '@app/insights/insight-computation.repository';
import { InsightsStep } from '@app/insights/insights.step';

/** The rollups service of the `rollups` and privacy commands, on the CLI's DataSource. */
export function buildRollups(
  dataSource: DataSource,
  config: AppConfig,
  audit: AuditService,
  // Without insights only for the benchmark's comparison of the computation's cost.
  options: { insights?: boolean } = {},
): RollupsService {
  // Nest's logger writes to stdout, which belongs to the command's output.
  Logger.overrideLogger(false);
  // Insights is a step of the computation, as in the server.
  const steps = new RollupSteps();
  if (options.insights ?? true)
    steps.register(new InsightsStep(new InsightComputationRepository(), steps, config));
  const computation = new RollupComputationRepository(dataSource, steps);
  const rezone = new RezoneService(computation, new RezoneRepository(dataSource, steps), config, audit);
  // The CLI reads the primary.
  return new RollupsService(
    new RollupRepository(new FixedReadDatabase(dataSource)),
    computation,
    config,
    rezone,
    new CursorSecretRepository(dataSource),
  );
}
