import { ByteWriter, ParquetWriter } from 'hyparquet-writer';
import type { SchemaElement } from 'hyparquet';
import {
  PRESENTED_EVENT_ID_CHARS,
  SEALED_EVENT_ID_BYTES,
  writePresentedEventId,
} from '@app/common/event-ids';
import type { EventRecordDto } from '@app/common/reads/event-record.dto';
import type { ExportUserKeys } from './export-user-keys';

/** An exported record: the event record and its user's key outside Tally (common/user-keys.ts). */
export type ExportRecord = EventRecordDto & { userKey: string | null };
import {
  COLUMN,
  COLUMNS,
  CopyRows,
  epochMs,
  int64,
  jsonbPayload,
  LEGACY_PAYLOAD,
  sealIds,
} from './copy-rows';
import { EVENT_FIELDS, type EventField, type EventFieldName } from '@app/common/events/event-fields';
import type { CopyChunk } from './export.service';

/**
 * Rows per row group, at most (whole chunks: a group is written once its chunks reach this many
 * rows or PARQUET_ROW_GROUP_BYTES). Until then its rows wait as the chunks' COPY bytes; it is then
 * encoded in memory, a column at a time, before it is sent. Large enough for a warehouse to read
 * efficiently (about 0.5 MB compressed at 1 KB per event).
 */
export const PARQUET_ROW_GROUP_ROWS = 10_000;

/**
 * COPY bytes per row group, at most (plus the last chunk's): what a group holds while it waits
 * and is encoded, whatever the events' size. 10,000 events of 29 KB would be 290 MB, and as much
 * again while encoded. 4 MiB keeps 10,000 small events (a few hundred bytes each) in one group,
 * as before, and about 140 of the largest, whose encoding then takes about 15 ms: under the
 * 50 ms an export may hold the event loop. 16 MiB took up to 65 ms, and 8 MiB added 74 MB to
 * the server's peak RSS during an export of 29 KB events, 4 MiB 43 MB (docs/performance.md).
 */
export const PARQUET_ROW_GROUP_BYTES = 4 * 1_048_576;

/** Whether a row group of `rows` rows and `bytes` COPY bytes is complete. */
export function rowGroupComplete(rows: number, bytes: number): boolean {
  return rows >= PARQUET_ROW_GROUP_ROWS || bytes >= PARQUET_ROW_GROUP_BYTES;
}

const TIMESTAMP_MILLIS = {
  type: 'INT64',
  converted_type: 'TIMESTAMP_MILLIS',
  logical_type: { type: 'TIMESTAMP', isAdjustedToUTC: true, unit: 'MILLIS' },
} as const;
const STRING = { type: 'BYTE_ARRAY', converted_type: 'UTF8' } as const;
const JSON_TEXT = { type: 'BYTE_ARRAY', converted_type: 'JSON' } as const;

/** The rows of one row group: where each column of each row is, in which chunk. */
interface Group {
  copies: Buffer[];
  rows: number;
  /** Column c of row r starts at starts[r * COLUMNS + c] of copies[source[r]]; lengths alike. */
  starts: Int32Array;
  lengths: Int32Array;
  source: Int32Array;
  /** The rows' presented ids, PRESENTED_EVENT_ID_CHARS bytes each. */
  ids: Buffer;
  appId: Uint8Array;
  /** The export's table of distinct text values, reused column after column. */
  interned: Interned;
  userKeys: ExportUserKeys;
}

type Value = Uint8Array | number | boolean | null;

export interface Column {
  name: keyof ExportRecord;
  element: Omit<SchemaElement, 'name' | 'repetition_type'>;
  required: boolean;
  /** Min/max per row group, for a reader's filter pushdown: kept where a filter is likely. */
  statistics?: boolean;
  /** Unique per event: a dictionary would only cost time, so the values are written plainly. */
  unique?: boolean;
  /** The column's values for the writer, in its physical form where it would convert them. */
  values: (group: Group) => Value[];
}

/** Bytes [from, from + length) of `bytes`, as a view (no copy). */
function viewOf(bytes: Buffer, from: number, length: number): Uint8Array {
  return new Uint8Array(bytes.buffer, bytes.byteOffset + from, length);
}

/**
 * One view per distinct byte string of a column: equal values share one object, so a column of
 * a few distinct names holds a few views, and the writer's dictionary (keyed by object first)
 * has one entry per name instead of one per row. An open-addressed table of FNV-1a hashes,
 * reused column after column.
 */
class Interned {
  private slots = new Int32Array(0);
  private readonly views: Uint8Array[] = [];

  /** Starts a column of up to `rows` values. */
  reset(rows: number): void {
    const size = 2 ** Math.ceil(Math.log2(rows * 2 + 1));
    if (this.slots.length < size) this.slots = new Int32Array(size);
    else this.slots.fill(0);
    this.views.length = 0;
  }

  view(copy: Buffer, from: number, length: number): Uint8Array {
    let hash = 0x811c9dc5;
    for (let i = from, end = from + length; i < end; i++) hash = Math.imul(hash ^ copy[i], 0x01000193);
    const { slots, views } = this;
    const mask = slots.length - 1;
    for (let slot = hash & mask; ; slot = (slot + 1) & mask) {
      const index = slots[slot];
      if (index === 0) {
        const view = viewOf(copy, from, length);
        views.push(view);
        slots[slot] = views.length;
        return view;
      }
      const view = views[index - 1];
      if (view.length === length && sameBytes(view, copy, from)) return view;
    }
  }
}

function sameBytes(view: Uint8Array, copy: Buffer, from: number): boolean {
  for (let i = 0; i < view.length; i++) if (view[i] !== copy[from + i]) return false;
  return true;
}

/** The bytes of a text column as views into the chunks' COPY (null where the value is null). */
const text =
  (column: number) =>
  ({ copies, rows, starts, lengths, source, interned }: Group): Value[] => {
    const values = new Array<Value>(rows);
    interned.reset(rows);
    for (let r = 0, at = column; r < rows; r++, at += COLUMNS) {
      values[r] = lengths[at] < 0 ? null : interned.view(copies[source[r]], starts[at], lengths[at]);
    }
    return values;
  };

/** The bytes of a column of unique text (an event id) as views, one per row. */
const uniqueText =
  (column: number) =>
  ({ copies, rows, starts, lengths, source }: Group): Value[] => {
    const values = new Array<Value>(rows);
    for (let r = 0, at = column; r < rows; r++, at += COLUMNS) {
      values[r] = lengths[at] < 0 ? null : viewOf(copies[source[r]], starts[at], lengths[at]);
    }
    return values;
  };

/** A fixed-width column's values from the COPY (null where the value is null). */
const fixed =
  (column: number, read: (copy: Buffer, at: number) => number | boolean) =>
  ({ copies, rows, starts, lengths, source }: Group): Value[] => {
    const values = new Array<Value>(rows);
    for (let r = 0, at = column; r < rows; r++, at += COLUMNS) {
      values[r] = lengths[at] < 0 ? null : read(copies[source[r]], starts[at]);
    }
    return values;
  };

/** The record's payload: the stored JSON text as it is (as NDJSON has it), or null. */
function payloads({ copies, rows, starts, lengths, source }: Group): Value[] {
  const values = new Array<Value>(rows);
  for (let r = 0; r < rows; r++) {
    const json = r * COLUMNS + COLUMN.payload;
    const jsonb = r * COLUMNS + LEGACY_PAYLOAD;
    const copy = copies[source[r]];
    if (lengths[json] >= 0) values[r] = viewOf(copy, starts[json], lengths[json]);
    else if (lengths[jsonb] >= 0) values[r] = Buffer.from(jsonbPayload(copy, starts[jsonb], lengths[jsonb]));
    else values[r] = null;
  }
  return values;
}

/** The records' userKeys: one shared value per user (./export-user-keys.ts), or null. */
function userKeys({ copies, rows, starts, lengths, source, userKeys: keys }: Group): Value[] {
  const values = new Array<Value>(rows);
  for (let r = 0, at = COLUMN.anonymousUserId; r < rows; r++, at += COLUMNS) {
    values[r] = lengths[at] < 0 ? null : keys.keyOf(copies[source[r]], starts[at], lengths[at]);
  }
  return values;
}

/** What a reader's filters and the writer's encodings want of some fields. */
const COLUMN_OPTIONS: Partial<Record<EventFieldName, Pick<Column, 'statistics' | 'unique'>>> = {
  id: { unique: true },
  eventName: { statistics: true },
  timestamp: { statistics: true },
  receivedAt: { statistics: true },
  eventId: { unique: true },
  payload: { unique: true },
};

/** The presented ids of the rows, as views. */
const presentedIds = ({ rows, ids }: Group): Value[] =>
  Array.from({ length: rows }, (_, r) => viewOf(ids, r * PRESENTED_EVENT_ID_CHARS, PRESENTED_EVENT_ID_CHARS));

/** A field's Parquet type and values. */
function typed(f: EventField, unique: boolean): Pick<Column, 'element' | 'values'> {
  switch (f.type) {
    case 'id':
      return { element: STRING, values: presentedIds };
    case 'uuid':
      return { element: STRING, values: ({ rows, appId }) => new Array<Value>(rows).fill(appId) };
    case 'text':
      return { element: STRING, values: unique ? uniqueText(COLUMN[f.name]) : text(COLUMN[f.name]) };
    case 'int8':
      return {
        element: 'epochMs' in f ? TIMESTAMP_MILLIS : { type: 'INT64' },
        values: fixed(COLUMN[f.name], int64),
      };
    case 'timestamptz': {
      const floor = !('position' in f);
      return {
        element: TIMESTAMP_MILLIS,
        values: fixed(COLUMN[f.name], (copy, at) => epochMs(copy, at, floor)),
      };
    }
    case 'bool':
      return { element: { type: 'BOOLEAN' }, values: fixed(COLUMN[f.name], (copy, at) => copy[at] !== 0) };
    case 'float8':
      return {
        element: { type: 'DOUBLE' },
        values: fixed(COLUMN[f.name], (copy, at) => copy.readDoubleBE(at)),
      };
    case 'json':
      // JSON text, as the record's payload object serialises.
      return { element: JSON_TEXT, values: payloads };
  }
}

/** The columns, in record order: the fields of an exported record (EVENT_FIELDS), typed, and the userKey. */
export const PARQUET_COLUMNS: readonly Column[] = [
  ...EVENT_FIELDS.map((f): Column => {
    const options = COLUMN_OPTIONS[f.name] ?? {};
    return { name: f.name, required: !f.nullable, ...options, ...typed(f, options.unique ?? false) };
  }),
  { name: 'userKey', element: STRING, required: false, values: userKeys },
];

/** How the writer encodes a column: the options of its `columnData` entry besides the values. */
export const writerOptions = (c: Column) => ({
  name: c.name,
  statistics: c.statistics ?? false,
  ...(c.unique ? { encoding: 'PLAIN' as const } : {}),
});

const schemaOf = (element: (c: Column) => Column['element']): SchemaElement[] => [
  { name: 'root', num_children: PARQUET_COLUMNS.length },
  ...PARQUET_COLUMNS.map((c): SchemaElement => ({
    ...element(c),
    name: c.name,
    repetition_type: c.required ? 'REQUIRED' : 'OPTIONAL',
  })),
];

/** The file's schema. */
export const PARQUET_SCHEMA = schemaOf((c) => c.element);
/**
 * The schema the writer encodes row groups with: the same, but the payload as bytes with no
 * annotation. The writer would otherwise take each JSON value as an object to stringify and
 * encode, where the stored text is already the JSON text. The annotation only names what the
 * bytes are: the pages, the column chunks' metadata and their (absent) statistics are the same
 * either way, and the file's footer, written from PARQUET_SCHEMA, has it.
 */
const WRITE_SCHEMA = schemaOf((c) => (c.element === JSON_TEXT ? { type: 'BYTE_ARRAY' } : c.element));

/**
 * Writes an export's chunks (their binary COPY, ./copy-rows.ts) as one Parquet file, row group
 * by row group: `add` keeps each chunk until its row group is complete and returns the bytes of
 * the row group it completes, `finish` the rest and the footer. The writer gets each column's
 * values only when it encodes that column, made from the chunks' bytes (text as views into
 * them, no string per value), and they are garbage once it moves on: one column of one row
 * group is all the JavaScript an export holds at a time.
 */
export class ParquetEncoder {
  private readonly out = new ByteWriter();
  private readonly writer: ParquetWriter;
  private readonly appId: Uint8Array;
  private readonly interned = new Interned();
  private pending: CopyChunk[] = [];
  private pendingRows = 0;
  private pendingBytes = 0;
  private starts = new Int32Array(0);
  private lengths = new Int32Array(0);
  private source = new Int32Array(0);
  private idStarts = new Int32Array(0);

  constructor(
    private readonly secret: Buffer,
    private readonly appIdText: string,
    private readonly userKeys: ExportUserKeys,
  ) {
    this.appId = Buffer.from(appIdText);
    this.writer = new ParquetWriter({
      writer: this.out,
      schema: WRITE_SCHEMA,
      codec: 'SNAPPY',
      createdBy: 'tally',
    });
  }

  /** Takes a chunk (released once its row group is written); the bytes of the row group it completes, if any. */
  add(chunk: CopyChunk): Uint8Array | null {
    if (chunk.rows === 0) {
      chunk.release();
      return null;
    }
    this.pending.push(chunk);
    this.pendingRows += chunk.rows;
    this.pendingBytes += chunk.copy.length;
    return rowGroupComplete(this.pendingRows, this.pendingBytes) ? this.flushGroup() : null;
  }

  /** Releases the chunks of the unfinished row group (an export cut short). */
  abandon(): void {
    for (const chunk of this.pending) chunk.release();
    this.pending = [];
    this.pendingRows = 0;
    this.pendingBytes = 0;
  }

  finish(): Uint8Array {
    const group = this.pendingRows > 0 ? this.flushGroup() : new Uint8Array(0);
    this.writer.schema = PARQUET_SCHEMA;
    void this.writer.finish();
    return concat(group, this.take());
  }

  private flushGroup(): Uint8Array {
    const group = this.group();
    // Each column's values are made when the writer reads them, and only the last made is kept
    // (the writer reads the first column's twice, for the row count).
    let made: { column: Column; values: Value[] } | null = null;
    const columnData = PARQUET_COLUMNS.map((c) => ({
      ...writerOptions(c),
      get data() {
        if (made?.column !== c) made = { column: c, values: c.values(group) };
        return made.values as never[];
      },
    }));
    void this.writer.write({ columnData, rowGroupSize: group.rows });
    this.keepStatistics();
    for (const chunk of this.pending) chunk.release();
    this.pending = [];
    this.pendingRows = 0;
    this.pendingBytes = 0;
    return this.take();
  }

  /** Where every column of every pending row is, and the rows' presented ids. */
  private group(): Group {
    const rows = this.pendingRows;
    if (this.source.length < rows) {
      this.starts = new Int32Array(rows * COLUMNS);
      this.lengths = new Int32Array(rows * COLUMNS);
      this.source = new Int32Array(rows);
      this.idStarts = new Int32Array(rows);
    }
    const { starts, lengths, source, idStarts } = this;
    const copies = this.pending.map((chunk) => chunk.copy);
    let r = 0;
    copies.forEach((copy, c) => {
      const row = new CopyRows(copy);
      while (row.next()) {
        if (r === rows) throw new Error('export: a chunk holds more rows than it counted');
        starts.set(row.starts, r * COLUMNS);
        lengths.set(row.lengths, r * COLUMNS);
        source[r] = c;
        idStarts[r] = row.starts[COLUMN.id];
        r++;
      }
    });
    if (r !== rows) throw new Error('export: a chunk holds fewer rows than it counted');
    const sealed = sealIds(this.secret, this.appIdText, copies, idStarts, rows, source);
    const ids = Buffer.allocUnsafe(rows * PRESENTED_EVENT_ID_CHARS);
    for (let i = 0; i < rows; i++) {
      writePresentedEventId(sealed, i * SEALED_EVENT_ID_BYTES, ids, i * PRESENTED_EVENT_ID_CHARS);
    }
    const { appId, interned, userKeys } = this;
    return { copies, rows, starts, lengths, source, ids, appId, interned, userKeys };
  }

  /**
   * The row group's min/max statistics are views into the chunks' bytes, which are reused for
   * later chunks once the group is written: the footer gets copies.
   */
  private keepStatistics(): void {
    for (const { meta_data } of this.writer.row_groups[this.writer.row_groups.length - 1].columns) {
      const statistics = meta_data?.statistics;
      if (!statistics) continue;
      if (statistics.min_value instanceof Uint8Array) statistics.min_value = statistics.min_value.slice();
      if (statistics.max_value instanceof Uint8Array) statistics.max_value = statistics.max_value.slice();
    }
  }

  /** The bytes written since the last take; the buffer is then reused from its start. */
  private take(): Uint8Array {
    const bytes = this.out.getBytes().slice();
    this.out.index = 0;
    return bytes;
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  const both = new Uint8Array(a.length + b.length);
  both.set(a, 0);
  both.set(b, a.length);
  return both;
}
