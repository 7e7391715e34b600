import { Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { Interval } from '@nestjs/schedule';
import { HOUR_MS } from '@app/common/time';
import { QuarantineService } from './quarantine.service';

/** The service's upkeep of the quarantine's partitions: once at boot, then hourly. */
@Injectable()
export class QuarantineMaintenanceJob implements OnApplicationBootstrap {
  private readonly logger = new Logger('Quarantine');

  constructor(private readonly quarantine: QuarantineService) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.quarantine.maintain(Date.now());
  }

  @Interval('quarantine-maintenance', HOUR_MS)
  async scheduled(): Promise<void> {
    try {
      await this.quarantine.maintain(Date.now());
    } catch (err) {
      this.logger.error(`quarantine maintenance failed: ${(err as Error).message}`);
    }
  }
}
