import { BinaryArrayWriter, ElementType, uuidBytes } from '@app/database/binary-arrays';
import { DEFAULT_TIME_ZONE, localDayNamer } from '@app/common/timezones';
import type { AcceptedEvent } from './ingest.types';

/** What the dirty marks of one statement need from each batch. */
export interface MarkedBatch {
  appId: string;
  /** The app's IANA time zone, from the key cache (UTC when absent). */
  timezone?: string;
  events: AcceptedEvent[];
}

/**
 * The dirty marks of one ingest statement: each distinct (app, local day, zone) its events fall
 * on, as three arrays in PostgreSQL's binary format. The day is named in the app's zone by the
 * same Intl rules as the rollup computation, so that the two always agree on a day's instants;
 * the namer remembers the current day's bounds, so an event costs two comparisons.
 */
export function dirtyMarkArrays(batches: MarkedBatch[]): Buffer[] {
  const marks = new Map<string, { app: Buffer; day: string; zone: string }>();
  for (const batch of batches) {
    const zone = batch.timezone ?? DEFAULT_TIME_ZONE;
    const namer = localDayNamer(zone);
    let last = '';
    for (const event of batch.events) {
      const day = namer.dateOf(event.ts);
      if (day === last) continue;
      last = day;
      const key = `${batch.appId} ${day} ${zone}`;
      if (!marks.has(key)) marks.set(key, { app: uuidBytes(batch.appId), day, zone });
    }
  }
  const list = [...marks.values()];
  const w = new BinaryArrayWriter(list.length * 64 + 64);
  w.begin(ElementType.uuid, list.length);
  for (const m of list) w.uuid(m.app);
  w.end().begin(ElementType.text, list.length);
  for (const m of list) w.text(m.day);
  w.end().begin(ElementType.text, list.length);
  for (const m of list) w.text(m.zone);
  return w.end().finish();
}
