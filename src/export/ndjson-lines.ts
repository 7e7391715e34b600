import {
  PRESENTED_EVENT_ID_CHARS,
  SEALED_EVENT_ID_BYTES,
  writePresentedEventId,
} from '@app/common/event-ids';
import { ChunkBuffers } from './chunk-buffers';
import { EVENT_FIELDS, type EventField, type EventFieldType } from '@app/common/events/event-fields';
import {
  COLUMN,
  CopyRows,
  epochMs,
  int64,
  jsonbPayload,
  LEGACY_PAYLOAD,
  positionAt,
  sealIds,
} from './copy-rows';
import type { ExportPosition } from './export.repository';
import type { ExportUserKeys } from './export-user-keys';

/**
 * The NDJSON export's lines, written straight from PostgreSQL's binary COPY of each row's
 * columns (ExportRepository.copyChunk; ./copy-rows.ts reads it) into one buffer per chunk, with
 * the fields, order and formatting of `JSON.stringify(toEventRecord(row))`, byte for byte. No
 * row object, no string per value: text columns are UTF-8 already and are copied byte by byte,
 * escaped as JSON.stringify escapes them; integers are written digit by digit; the ids of a
 * whole chunk are sealed in one cipher call and written in at the end.
 *
 * The JSON is written here rather than in SQL: building the text in PostgreSQL (to_json per
 * column, numeric epochs, a concatenation per field) was most of its CPU per exported event, and
 * the binary columns are half as many bytes (docs/performance.md).
 */

/** Where a line's id starts: after `{"id":"`. */
const ID_OFFSET = 7;

/** A chunk ready to send: its lines, its row count, and where its last row is. */
export interface FinishedChunk {
  lines: Buffer;
  /** Hands the lines' memory back for a later chunk: call once nothing reads `lines` any more. */
  release: () => void;
  rows: number;
  last: ExportPosition | null;
  /** Milliseconds the server spent finishing it (for ./fair-share.ts). */
  workMs: number;
  /** The size of the COPY data it was written from. */
  copyBytes: number;
}

const ascii = (text: string) => Uint8Array.from(text, (c) => c.charCodeAt(0));
const USER_KEY = ascii(',"userKey":');
const NULL = ascii('null');
const QUOTE = ascii('"');
const TRUE = ascii('true');
const FALSE = ascii('false');
const LINE_END = ascii('}\n');
const HEX = ascii('0123456789abcdef');
/** The short escapes of JSON.stringify (and of PostgreSQL's to_json): \b \t \n \f \r. */
const SHORT_ESCAPES: Record<number, number> = { 8: 0x62, 9: 0x74, 10: 0x6e, 12: 0x66, 13: 0x72 };
/** The longest a row's line can be beyond 6 bytes per column byte (each escaped as \u00XX). */
const LINE_OVERHEAD = 512;

/**
 * One chunk's NDJSON, written into a buffer that grows when a row could overflow it. `at` is
 * where the next byte goes.
 */
class LineWriter {
  out: Buffer;
  at = 0;

  constructor(
    private readonly buffers: ChunkBuffers,
    capacity: number,
  ) {
    this.out = buffers.take(capacity);
  }

  /** Room for `bytes` more. */
  reserve(bytes: number): void {
    if (this.at + bytes <= this.out.length) return;
    const bigger = this.buffers.take(Math.max(this.out.length * 2, this.at + bytes));
    this.out.copy(bigger, 0, 0, this.at);
    this.buffers.give(this.out);
    this.out = bigger;
  }

  bytes(text: Uint8Array): void {
    const out = this.out;
    let at = this.at;
    for (let i = 0; i < text.length; i++) out[at++] = text[i];
    this.at = at;
  }

  /** Bytes [from, to) of `source` as they are (JSON text already). */
  raw(source: Buffer, from: number, to: number): void {
    if (to - from > 64) {
      this.at += source.copy(this.out, this.at, from, to);
      return;
    }
    const out = this.out;
    let at = this.at;
    for (let i = from; i < to; i++) out[at++] = source[i];
    this.at = at;
  }

  /** UTF-8 text [from, to) of `source` as a JSON string, escaped as JSON.stringify escapes it. */
  string(source: Buffer, from: number, to: number): void {
    const out = this.out;
    let at = this.at;
    out[at++] = 0x22;
    for (let i = from; i < to; i++) {
      const b = source[i];
      if (b >= 0x20 && b !== 0x22 && b !== 0x5c) {
        out[at++] = b;
        continue;
      }
      out[at++] = 0x5c;
      if (b === 0x22 || b === 0x5c) out[at++] = b;
      else if (SHORT_ESCAPES[b] !== undefined) out[at++] = SHORT_ESCAPES[b];
      else {
        out[at++] = 0x75; // u00XX
        out[at++] = 0x30;
        out[at++] = 0x30;
        out[at++] = HEX[b >> 4];
        out[at++] = HEX[b & 15];
      }
    }
    out[at++] = 0x22;
    this.at = at;
  }

  /** An integer, as JSON.stringify writes it: digit by digit when it is a safe integer. */
  integer(n: number): void {
    if (n > Number.MAX_SAFE_INTEGER || n < -Number.MAX_SAFE_INTEGER) {
      this.text(JSON.stringify(n));
      return;
    }
    const out = this.out;
    if (n < 0) {
      out[this.at++] = 0x2d;
      n = -n;
    }
    let digits = 1;
    for (let p = 10; p <= n; p *= 10) digits++;
    let at = this.at + digits;
    this.at = at;
    do {
      const q = Math.floor(n / 10);
      out[--at] = 0x30 + (n - q * 10);
      n = q;
    } while (n > 0);
  }

  /** Any other text JSON.stringify wrote (ASCII). */
  text(text: string): void {
    const out = this.out;
    let at = this.at;
    for (let i = 0; i < text.length; i++) out[at++] = text.charCodeAt(i);
    this.at = at;
  }
}

/** Text column `column` of the row as a JSON string, or null. */
function textValue(writer: LineWriter, row: CopyRows, column: number): void {
  const { starts, lengths } = row;
  if (lengths[column] < 0) writer.bytes(NULL);
  else writer.string(row.copy, starts[column], starts[column] + lengths[column]);
}

/** The record's payload: the stored JSON text, or null. */
function payloadValue(writer: LineWriter, row: CopyRows): void {
  const { copy, starts, lengths } = row;
  const column = COLUMN.payload;
  if (lengths[column] >= 0) {
    // Stored as ingest writes it: the compact text of JSON.stringify.
    writer.raw(copy, starts[column], starts[column] + lengths[column]);
  } else if (lengths[LEGACY_PAYLOAD] >= 0) {
    const json = Buffer.from(jsonbPayload(copy, starts[LEGACY_PAYLOAD], lengths[LEGACY_PAYLOAD]));
    writer.reserve(json.length + 2);
    writer.raw(json, 0, json.length);
  } else writer.bytes(NULL);
}

/** The record's userKey (./export-user-keys.ts), or null with the user id. */
function userKeyField(writer: LineWriter, row: CopyRows, userKeys: ExportUserKeys): void {
  const { starts, lengths } = row;
  writer.bytes(USER_KEY);
  if (lengths[COLUMN.anonymousUserId] < 0) {
    writer.bytes(NULL);
    return;
  }
  const key = userKeys.keyOf(row.copy, starts[COLUMN.anonymousUserId], lengths[COLUMN.anonymousUserId]);
  writer.bytes(QUOTE);
  writer.bytes(key);
  writer.bytes(QUOTE);
}

/** One field of a line after the head: its key, and where and as what its value is read. */
interface LineField {
  key: Uint8Array;
  column: number;
  type: EventFieldType;
  /** A position field: its time truncated (epoch µs ÷ 1000n), as the record's receivedAt. */
  position: boolean;
}

/** The record's fields after its id and app, which the line's head holds, in record order. */
const LINE_FIELDS: readonly LineField[] = EVENT_FIELDS.filter(
  (f): f is Exclude<EventField, { type: 'id' | 'uuid' }> => f.type !== 'id' && f.type !== 'uuid',
).map((f) => ({
  key: ascii(`,"${f.name}":`),
  column: COLUMN[f.name],
  type: f.type,
  position: 'position' in f,
}));

/** One field's value, as JSON.stringify writes the record's. */
function writeValue(writer: LineWriter, row: CopyRows, field: LineField): void {
  const { copy, starts, lengths } = row;
  const at = starts[field.column];
  if (field.type === 'text') return textValue(writer, row, field.column);
  if (field.type === 'json') return payloadValue(writer, row);
  if (lengths[field.column] < 0) return writer.bytes(NULL);
  switch (field.type) {
    case 'int8':
      return writer.integer(int64(copy, at));
    case 'timestamptz':
      return writer.integer(epochMs(copy, at, !field.position));
    case 'bool':
      return writer.bytes(copy[at] ? TRUE : FALSE);
    case 'float8':
      // JSON.stringify writes NaN and the infinities as null, and -0 as 0, as the record does.
      return writer.text(JSON.stringify(copy.readDoubleBE(at)));
  }
}

/** The current row as a line, its id left blank. */
function writeLine(writer: LineWriter, row: CopyRows, head: Uint8Array, userKeys: ExportUserKeys): void {
  writer.bytes(head);
  for (let i = 0; i < LINE_FIELDS.length; i++) {
    const field = LINE_FIELDS[i];
    writer.bytes(field.key);
    writeValue(writer, row, field);
  }
  userKeyField(writer, row, userKeys);
  writer.bytes(LINE_END);
}

/**
 * Turns one chunk's binary COPY into NDJSON lines of the records of `appId`, in a buffer from
 * `buffers`. Throws on anything that is not a row of EXPORT_FIELDS. `copy` is not read after.
 */
export function finishCopy(
  secret: Buffer,
  appId: string,
  copy: Buffer,
  userKeys: ExportUserKeys,
  buffers = new ChunkBuffers(),
): FinishedChunk {
  const started = performance.now();
  const row = new CopyRows(copy);
  // Everything from the line's start to the app's value, with a blank for the id.
  const head = ascii(`{"id":"${' '.repeat(PRESENTED_EVENT_ID_CHARS)}","appId":"${appId}"`);
  // A line is about twice its row's COPY bytes (the keys); longer ones make the buffer grow.
  const writer = new LineWriter(buffers, copy.length * 2 + LINE_OVERHEAD);
  const idAt: number[] = [];
  const ids: number[] = [];
  let lastReceivedAt = -1;
  while (row.next()) {
    writer.reserve(6 * (row.rowEnd - row.rowStart) + LINE_OVERHEAD);
    ids.push(row.starts[COLUMN.id]);
    lastReceivedAt = row.starts[COLUMN.receivedAt];
    idAt.push(writer.at + ID_OFFSET);
    writeLine(writer, row, head, userKeys);
  }
  const rows = ids.length;
  const out = writer.out;
  const release = () => buffers.give(out);
  if (rows === 0) {
    const workMs = performance.now() - started;
    return { lines: out.subarray(0, 0), release, rows, last: null, workMs, copyBytes: copy.length };
  }
  const sealed = sealIds(secret, appId, [copy], ids, rows);
  for (let i = 0; i < rows; i++) writePresentedEventId(sealed, i * SEALED_EVENT_ID_BYTES, out, idAt[i]);
  return {
    lines: out.subarray(0, writer.at),
    release,
    rows,
    last: positionAt(copy, lastReceivedAt, ids[rows - 1]),
    workMs: performance.now() - started,
    copyBytes: copy.length,
  };
}
