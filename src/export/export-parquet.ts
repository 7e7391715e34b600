import { ByteWriter, ParquetWriter } from 'hyparquet-writer';
import type { SchemaElement } from 'hyparquet';
import type { EventRecordDto } from '@app/common/reads/event-record.dto';

/**
 * Rows per row group. A row group is encoded in memory before it is sent, so this bounds the
 * export's memory (about 10 MB of column data at 1 KB per event), while staying large enough
 * for a warehouse to read efficiently.
 */
export const PARQUET_ROW_GROUP_ROWS = 10_000;

type Field = keyof EventRecordDto;

const TIMESTAMP_MILLIS = {
  type: 'INT64',
  converted_type: 'TIMESTAMP_MILLIS',
  logical_type: { type: 'TIMESTAMP', isAdjustedToUTC: true, unit: 'MILLIS' },
} as const;
const STRING = { type: 'BYTE_ARRAY', converted_type: 'UTF8' } as const;

interface Column {
  name: Field;
  element: Omit<SchemaElement, 'name' | 'repetition_type'>;
  required: boolean;
  /** Min/max per row group, for a reader's filter pushdown: kept where a filter is likely. */
  statistics?: boolean;
  /** Unique per event: a dictionary would only cost time, so the values are written plainly. */
  unique?: boolean;
}

/** The columns, in record order: the fields of an event record, typed. */
const COLUMNS: Column[] = [
  { name: 'id', element: STRING, required: true, unique: true },
  { name: 'appId', element: STRING, required: true },
  { name: 'eventName', element: STRING, required: true, statistics: true },
  { name: 'anonymousUserId', element: STRING, required: false },
  { name: 'sessionId', element: STRING, required: false },
  { name: 'eventTime', element: TIMESTAMP_MILLIS, required: false },
  { name: 'timestamp', element: TIMESTAMP_MILLIS, required: true, statistics: true },
  { name: 'receivedAt', element: TIMESTAMP_MILLIS, required: true, statistics: true },
  { name: 'eventId', element: STRING, required: false, unique: true },
  { name: 'isTestMode', element: { type: 'BOOLEAN' }, required: true },
  { name: 'platform', element: STRING, required: false },
  { name: 'appVersion', element: STRING, required: false },
  { name: 'buildNumber', element: STRING, required: false },
  { name: 'osVersion', element: STRING, required: false },
  { name: 'deviceModel', element: STRING, required: false },
  { name: 'locale', element: STRING, required: false },
  { name: 'timezone', element: STRING, required: false },
  { name: 'floatValue', element: { type: 'DOUBLE' }, required: false },
  // JSON text, as the record's payload object serialises.
  { name: 'payload', element: { type: 'BYTE_ARRAY', converted_type: 'JSON' }, required: false, unique: true },
];

const SCHEMA: SchemaElement[] = [
  { name: 'root', num_children: COLUMNS.length },
  ...COLUMNS.map((c): SchemaElement => ({
    ...c.element,
    name: c.name,
    repetition_type: c.required ? 'REQUIRED' : 'OPTIONAL',
  })),
];

/**
 * Writes event records as one Parquet file, row group by row group: `add` buffers records and
 * returns the bytes of each row group it completes, `finish` the rest and the footer. Only one
 * row group is ever held.
 */
export class ParquetEncoder {
  private readonly out = new ByteWriter();
  private readonly writer: ParquetWriter;
  private columns: unknown[][] = COLUMNS.map(() => []);
  private rows = 0;

  constructor() {
    this.writer = new ParquetWriter({
      writer: this.out,
      schema: SCHEMA,
      codec: 'SNAPPY',
      createdBy: 'tally',
    });
  }

  add(records: EventRecordDto[]): Uint8Array[] {
    const ready: Uint8Array[] = [];
    for (const record of records) {
      for (let c = 0; c < COLUMNS.length; c++) this.columns[c].push(record[COLUMNS[c].name]);
      if (++this.rows === PARQUET_ROW_GROUP_ROWS) ready.push(this.flushGroup());
    }
    return ready;
  }

  finish(): Uint8Array {
    const group = this.rows > 0 ? this.flushGroup() : new Uint8Array(0);
    void this.writer.finish();
    return concat(group, this.take());
  }

  private flushGroup(): Uint8Array {
    const columnData = COLUMNS.map((c, i) => ({
      name: c.name,
      data: this.columns[i] as never[],
      statistics: c.statistics ?? false,
      ...(c.unique ? { encoding: 'PLAIN' as const } : {}),
    }));
    void this.writer.write({ columnData, rowGroupSize: this.rows });
    this.columns = COLUMNS.map(() => []);
    this.rows = 0;
    return this.take();
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
