import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { DedupRepository } from './dedup.repository';
import { dedupWindowMs } from './ingest.limits';
import type { AcceptedEvent } from './ingest.types';

/** The dedup records: which event ids an app already stored within the window, and their expiry. */
@Injectable()
export class DedupService {
  constructor(
    private readonly dedup: DedupRepository,
    @Inject(APP_CONFIG) private readonly config: ConfigSlice<'ingestMaxEventAgeDays'>,
  ) {}

  /** The positions in `events` that ingest would find already stored (a dry run's duplicates). */
  async alreadySeen(appId: string, receivedAt: number, events: AcceptedEvent[]): Promise<number[]> {
    const ids = events.flatMap((e) => (e.eventId === null ? [] : [e.eventId]));
    const seen = await this.dedup.seen(appId, ids, receivedAt, dedupWindowMs(this.config));
    return events.flatMap((e, i) => (e.eventId !== null && seen.has(e.eventId) ? [i] : []));
  }

  /** Deletes the records seen before the window that ends at `now`; returns how many. */
  expire(now: number): Promise<number> {
    return this.dedup.expire(new Date(now - dedupWindowMs(this.config)));
  }
}
