import {
  EVENT_FIELDS,
  FIELD_TYPES,
  keyOf,
  type EventField,
  type EventValues,
} from '@app/common/events/event-fields';
import { BinaryArrayWriter, ElementType, uuidBytes } from '@app/database/binary-arrays';

/** An element type of BinaryArrayWriter; the repository names its SQL type. */
export type ColumnType = keyof typeof ElementType;

/** The rows of one ingest statement: `batchOf[i]` is the batch of `events[i]`. */
export interface ColumnRows {
  batches: readonly { appId: string; receivedAt: number }[];
  events: readonly EventValues[];
  batchOf: readonly number[];
}

/** One column of the ingest statement's input rows: one array parameter, one `unnest` column. */
export interface IngestColumn {
  /** Its column in `events` (and its name in the statement's input rows). */
  name: string;
  type: ColumnType;
  /** Writes the column's elements, one per row, into the array the writer has begun. */
  fill(w: BinaryArrayWriter, rows: ColumnRows): void;
}

type Fill = IngestColumn['fill'];

const IDENTIFIER = /^[A-Za-z][A-Za-z0-9]*$/;

/**
 * A per-event column: each event's value under `key`. The loop is compiled per column (the key
 * and type come from EVENT_FIELDS, never from input), so that each loop reads one property at
 * one site, as a hand-written loop would; one loop shared by all columns costs a third more.
 */
function eventFill(type: ColumnType, key: string): Fill {
  if (!IDENTIFIER.test(key) || type === 'uuid')
    throw new Error(`ingest: no per-event column ${key} (${type})`);
  const value = type === 'json' ? 'v === null ? null : JSON.stringify(v)' : 'v';
  return new Function(
    'w',
    'rows',
    `const events = rows.events;
     for (let i = 0; i < events.length; i++) {
       const v = events[i].${key};
       w.${type}(${value});
     }`,
  ) as Fill;
}

/** A per-request column: the app (uuid) or the receive time of each row's batch. */
function requestFill(type: ColumnType): Fill {
  if (type === 'uuid') {
    return (w, { batches, batchOf }) => {
      const apps = batches.map((b) => uuidBytes(b.appId));
      for (let i = 0; i < batchOf.length; i++) w.uuid(apps[batchOf[i]]);
    };
  }
  return (w, { batches, batchOf }) => {
    for (let i = 0; i < batchOf.length; i++) w.timestamptz(batches[batchOf[i]].receivedAt);
  };
}

function ingestColumn(field: Exclude<EventField, { source: 'database' }>): IngestColumn {
  const type = FIELD_TYPES[field.type].element;
  return {
    name: field.column,
    type,
    fill: field.source === 'request' ? requestFill(type) : eventFill(type, keyOf(field)),
  };
}

/**
 * The ingest statement's columns, in parameter order: every field of EVENT_FIELDS but the id the
 * database assigns. The statement's text and its arrays are both built from this list, so that a
 * column cannot be in one and not the other.
 */
export const INGEST_COLUMNS: readonly IngestColumn[] = EVENT_FIELDS.filter(
  (f): f is Exclude<EventField, { source: 'database' }> => f.source !== 'database',
).map(ingestColumn);

/** The SQL type of each element type, as a statement casts its arrays. */
export const SQL_TYPE: Record<ColumnType, string> = {
  uuid: 'uuid',
  timestamptz: 'timestamptz',
  text: 'text',
  int8: 'bigint',
  bool: 'boolean',
  float8: 'float8',
  json: 'json',
  bytea: 'bytea',
};

/** The parameters `$1…$n` of `columns`' arrays (columnArrays), each cast to its array type. */
export function unnestArrays(columns: readonly IngestColumn[] = INGEST_COLUMNS): string {
  return columns.map((c, k) => `$${k + 1}::${SQL_TYPE[c.type]}[]`).join(', ');
}

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
