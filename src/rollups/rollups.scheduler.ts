import { Inject, Injectable, Logger, OnApplicationBootstrap, Optional } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { MetricsService } from '@app/common/metrics/metrics.service';
import { startJob } from '@app/common/jobs';
import { RollupsService } from './rollups.service';

export const ROLLUP_INTERVAL_NAME = 'rollups';

/**
 * Triggers the rollup computation every ROLLUP_INTERVAL_SECONDS when ROLLUPS_ENABLED. The
 * interval comes from the configuration, so it starts with `startJob` at boot rather than with a
 * decorator. The registry is absent where the schedule module is not loaded (the CLI).
 */
@Injectable()
export class RollupsScheduler implements OnApplicationBootstrap {
  private readonly logger = new Logger(RollupsScheduler.name);

  constructor(
    private readonly rollups: RollupsService,
    @Inject(APP_CONFIG) private readonly config: ConfigSlice<'rollupsEnabled' | 'rollupIntervalSeconds'>,
    @Optional() private readonly registry?: SchedulerRegistry,
    @Optional() private readonly metrics?: MetricsService,
  ) {}

  onApplicationBootstrap(): void {
    if (!this.config.rollupsEnabled || !this.registry) return;
    startJob(this.registry, {
      name: ROLLUP_INTERVAL_NAME,
      everyMs: this.config.rollupIntervalSeconds * 1000,
      run: () => this.tick(),
      logger: this.logger,
    });
  }

  async tick(): Promise<void> {
    const started = Date.now();
    const seconds = () => (Date.now() - started) / 1000;
    try {
      const result = await this.rollups.run();
      const outcome = result.status === 'skipped' ? 'skipped' : result.abandoned ? 'abandoned' : 'completed';
      this.metrics?.observeRollupRun({ seconds: seconds(), lagSeconds: result.lagSeconds, outcome });
    } catch (err) {
      this.metrics?.observeRollupRun({ seconds: seconds(), outcome: 'failed' });
      this.logger.error(`rollup computation failed: ${(err as Error).message}`);
    }
  }
}
