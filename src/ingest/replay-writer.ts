import { Inject, Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { fieldsFrom, keyOf, type EventValues } from '@app/common/events/event-fields';
import { EventNameBound, type EventNameAdmission } from './event-name-bound';
import { commitWithinMs, dedupWindowMs } from './ingest.limits';
import { IngestRepository } from './ingest.repository';
import type { AcceptedEvent } from './ingest.types';

/** The keys of an event as ingest holds it. */
const EVENT_KEYS = fieldsFrom('event').map((f) => keyOf(f) as keyof EventValues);

/** The event ingest would have accepted: the stored values under their keys, at `index`. */
export function acceptedEvent(values: EventValues, index: number): AcceptedEvent {
  const event: Record<string, unknown> = { index };
  for (const key of EVENT_KEYS) event[key] = values[key];
  return event as unknown as AcceptedEvent;
}

/**
 * Ingest's write for events that come back later (the quarantine's replay): the day's
 * event-name bound as ingest applies it, and ingest's own insert statement (its dedup claim
 * included) inside the caller's transaction.
 */
@Injectable()
export class ReplayWriter {
  constructor(
    @Inject(APP_CONFIG) private readonly config: ConfigSlice<'ingestMaxEventAgeDays' | 'exportSettleMs'>,
    private readonly events: IngestRepository,
    private readonly eventNames: EventNameBound,
  ) {}

  /** The app's event-name bound at `now`, with the days of `timestamps` loaded. */
  async names(appId: string, timestamps: number[], now: number): Promise<EventNameAdmission> {
    await this.eventNames.loaded(appId, timestamps, now);
    return this.eventNames.forApp(appId, now);
  }

  /** Writes the events in `manager`'s transaction as ingest does; returns the positions already stored. */
  async write(
    manager: EntityManager,
    batch: { appId: string; receivedAt: number; events: AcceptedEvent[]; timezone: string },
  ): Promise<number[]> {
    const [repeated] = await this.events.insertBatchesIn(
      manager,
      [batch],
      dedupWindowMs(this.config),
      commitWithinMs(this.config),
    );
    return repeated;
  }
}
