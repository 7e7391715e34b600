import { BinaryArrayWriter, ElementType, uuidBytes } from '@app/database/binary-arrays';
import type { AcceptedEvent } from './ingest.types';

/** An element type of BinaryArrayWriter; the repository names its SQL type. */
export type ColumnType = keyof typeof ElementType;

/** The rows of one ingest statement: `batchOf[i]` is the batch of `events[i]`. */
export interface ColumnRows {
  batches: readonly { appId: string; receivedAt: number }[];
  events: readonly AcceptedEvent[];
  batchOf: readonly number[];
}

/** One column of the ingest statement's input rows: one array parameter, one `unnest` column. */
export interface IngestColumn {
  /** Its name in the statement's input rows. */
  name: string;
  /** Its column in `events`, when the name differs there. */
  stored?: string;
  type: ColumnType;
  /** Writes the column's elements, one per row, into the array the writer has begun. */
  fill(w: BinaryArrayWriter, rows: ColumnRows): void;
}

type Field<T> = (event: AcceptedEvent) => T;

const text = (name: string, get: Field<string | null>): IngestColumn => ({
  name,
  type: 'text',
  fill: (w, { events }) => {
    for (let i = 0; i < events.length; i++) w.text(get(events[i]));
  },
});

/**
 * The ingest statement's columns, in parameter order ($1…$18). The statement's text and its
 * arrays are both built from this list, so that a column cannot be in one and not the other.
 */
export const INGEST_COLUMNS: readonly IngestColumn[] = [
  {
    name: 'app_id',
    type: 'uuid',
    fill: (w, { batches, batchOf }) => {
      const apps = batches.map((b) => uuidBytes(b.appId));
      for (let i = 0; i < batchOf.length; i++) w.uuid(apps[batchOf[i]]);
    },
  },
  {
    name: 'received_at',
    type: 'timestamptz',
    fill: (w, { batches, batchOf }) => {
      for (let i = 0; i < batchOf.length; i++) w.timestamptz(batches[batchOf[i]].receivedAt);
    },
  },
  text('event_id', (e) => e.eventId),
  {
    name: 'ts',
    type: 'timestamptz',
    fill: (w, { events }) => {
      for (let i = 0; i < events.length; i++) w.timestamptz(events[i].ts);
    },
  },
  {
    name: 'event_time',
    type: 'int8',
    fill: (w, { events }) => {
      for (let i = 0; i < events.length; i++) w.int8(events[i].eventTime);
    },
  },
  text('event_name', (e) => e.eventName),
  text('anonymous_user_id', (e) => e.anonymousUserId),
  text('session_id', (e) => e.sessionId),
  {
    name: 'is_test_mode',
    type: 'bool',
    fill: (w, { events }) => {
      for (let i = 0; i < events.length; i++) w.bool(events[i].isTestMode);
    },
  },
  text('platform', (e) => e.platform),
  text('app_version', (e) => e.appVersion),
  text('build_number', (e) => e.buildNumber),
  text('os_version', (e) => e.osVersion),
  text('device_model', (e) => e.deviceModel),
  text('locale', (e) => e.locale),
  text('timezone', (e) => e.timezone),
  {
    name: 'float_value',
    type: 'float8',
    fill: (w, { events }) => {
      for (let i = 0; i < events.length; i++) w.float8(events[i].floatValue);
    },
  },
  {
    name: 'payload',
    stored: 'payload_json',
    type: 'json',
    fill: (w, { events }) => {
      for (let i = 0; i < events.length; i++) {
        const payload = events[i].payload;
        w.json(payload === null ? null : JSON.stringify(payload));
      }
    },
  },
];

/**
 * The arrays of one statement, one per column in order, in PostgreSQL's binary format: no
 * escaping, fixed-size uuids, numbers and timestamps, and one buffer for the whole statement.
 */
export function columnArrays(rows: ColumnRows, columns: readonly IngestColumn[] = INGEST_COLUMNS): Buffer[] {
  const n = rows.events.length;
  // About what the JSON of an event takes, so that most statements never regrow the buffer.
  const w = new BinaryArrayWriter(n * 400);
  for (const column of columns) {
    w.begin(ElementType[column.type], n);
    column.fill(w, rows);
    w.end();
  }
  return w.finish();
}
