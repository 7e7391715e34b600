import { Injectable, Logger } from '@nestjs/common';
import { Interval } from '@nestjs/schedule';
import { HOUR_MS } from '@app/common/time';
import { DedupService } from './dedup.service';

/**
 * Expires dedup records past the dedup window, hourly. An event that old is refused anyway
 * (`event_too_old`), so its id no longer needs remembering.
 */
@Injectable()
export class DedupExpiryService {
  private readonly logger = new Logger(DedupExpiryService.name);

  constructor(private readonly dedup: DedupService) {}

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
    return this.dedup.expire(now);
  }
}
