import { Inject, Injectable, Logger } from '@nestjs/common';
import { Interval } from '@nestjs/schedule';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { HOUR_MS } from '@app/common/time';
import { DedupRepository } from './dedup.repository';
import { dedupWindowMs } from './ingest.limits';

/**
 * Expires dedup records past the dedup window, hourly. An event that old is refused anyway
 * (`event_too_old`), so its id no longer needs remembering.
 */
@Injectable()
export class DedupExpiryService {
  private readonly logger = new Logger(DedupExpiryService.name);

  constructor(
    private readonly dedup: DedupRepository,
    @Inject(APP_CONFIG) private readonly config: ConfigSlice<'ingestMaxEventAgeDays'>,
  ) {}

  @Interval('dedup-expiry', HOUR_MS)
  async scheduled(): Promise<void> {
    try {
      await this.run(Date.now());
    } catch (err) {
      this.logger.error(`dedup expiry failed: ${(err as Error).message}`);
    }
  }

  /** Deletes the records seen before the window that ends at `now`; returns how many. */
  run(now: number): Promise<number> {
    return this.dedup.expire(new Date(now - dedupWindowMs(this.config)));
  }
}
