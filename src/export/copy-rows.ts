import { sealEventIdBlocks, SEALED_EVENT_ID_BYTES } from '@app/common/event-ids';
import { PG_EPOCH_MS } from '@app/database/binary-arrays';
import { copyHeaderEnd, tupleEnd } from '@app/database/copy-tuples';
import { EVENT_FIELDS, POSITION_FIELDS, type EventField } from '@app/common/events/event-fields';

/** A position in an export: the receive time (epoch microseconds) and stored id of a row. */
export interface ExportPosition {
  receivedUs: bigint;
  id: bigint;
}

/**
 * Reading PostgreSQL's binary COPY of the export's columns (EXPORT_FIELDS, which the repository
 * selects), which both formats are written from: stored values as they are, timestamps as
 * microseconds from PostgreSQL's epoch, integers and floats as 8 big-endian bytes, text as UTF-8.
 */

type ExportField = Exclude<EventField, { type: 'uuid' }>;

/**
 * The stored fields an export reads, in COPY order: the position first (receivedAt, id), then
 * the record's other fields in record order. The app is the window's, so it is not read. After
 * them comes one more column, LEGACY_PAYLOAD.
 */
export const EXPORT_FIELDS: readonly ExportField[] = [
  ...POSITION_FIELDS,
  ...EVENT_FIELDS.filter((f): f is ExportField => f.type !== 'uuid' && !('position' in f)),
];

/** The column of a row holding the older jsonb payload as text, where no json text is stored. */
export const LEGACY_PAYLOAD = EXPORT_FIELDS.length;

/** The columns of a row by field name, in COPY order. */
export const COLUMN = Object.fromEntries(EXPORT_FIELDS.map((f, i) => [f.name, i])) as Record<
  ExportField['name'],
  number
>;
export const COLUMNS = EXPORT_FIELDS.length + 1;

const PG_EPOCH_US = PG_EPOCH_MS * 1000;
const PG_EPOCH_US_BIG = BigInt(PG_EPOCH_US);
const TWO_32 = 4_294_967_296;

function copyError(detail: string): Error {
  return new Error(`export: unexpected COPY data (${detail})`);
}

/**
 * The rows of one chunk's COPY, one after the other: `next()` moves to the next row and puts
 * where each of its columns starts and how long it is (-1: null) in `starts` and `lengths`.
 * Throws on anything that is not a row of EXPORT_FIELDS.
 */
export class CopyRows {
  readonly starts = new Int32Array(COLUMNS);
  readonly lengths = new Int32Array(COLUMNS);
  /** Where the current row starts and ends in `copy`. */
  rowStart = 0;
  rowEnd: number;

  constructor(readonly copy: Buffer) {
    let start: number | null;
    try {
      start = copyHeaderEnd(copy);
    } catch {
      start = null; // not a binary COPY's signature: no header either
    }
    if (start === null) throw copyError('no binary COPY header');
    this.rowEnd = start;
  }

  next(): boolean {
    const { copy, starts, lengths } = this;
    const at = this.rowEnd;
    const fields = copy.readInt16BE(at);
    if (fields === -1) return false;
    if (fields !== COLUMNS) throw copyError('row shape');
    let p = at + 2;
    for (let c = 0; c < COLUMNS; c++) {
      const length = copy.readInt32BE(p);
      p += 4;
      starts[c] = p;
      lengths[c] = length;
      if (length > 0) p += length;
    }
    if (
      p > copy.length ||
      lengths[COLUMN.receivedAt] !== 8 ||
      lengths[COLUMN.id] !== 8 ||
      lengths[COLUMN.timestamp] !== 8 ||
      lengths[COLUMN.eventName] < 0
    ) {
      throw copyError('row shape');
    }
    this.rowStart = at;
    this.rowEnd = p;
    return true;
  }
}

/**
 * Where the last complete row of the first `length` bytes of a binary COPY ends (its rows' end,
 * without the trailer), or null while no row is complete. The trailer itself counts as
 * incomplete data: a COPY that holds it is whole and needs no cut.
 */
export function completeRowsEnd(copy: Buffer, length: number): number | null {
  let p = copyHeaderEnd(copy, length);
  let end: number | null = null;
  while (p !== null && p + 2 <= length) {
    if (copy.readInt16BE(p) < 0) return null;
    p = tupleEnd(copy, p, length);
    if (p !== null) end = p;
  }
  return end;
}

/** How many rows a chunk's COPY holds, and where its last row is in the export's order. */
export function copyExtent(copy: Buffer): { rows: number; last: ExportPosition | null } {
  const rows = new CopyRows(copy);
  let count = 0;
  let receivedAt = -1;
  let id = -1;
  while (rows.next()) {
    count++;
    receivedAt = rows.starts[COLUMN.receivedAt];
    id = rows.starts[COLUMN.id];
  }
  return { rows: count, last: count ? positionAt(copy, receivedAt, id) : null };
}

/** The export position of a row whose receive time and id start at these offsets. */
export function positionAt(copy: Buffer, receivedAt: number, id: number): ExportPosition {
  return { receivedUs: copy.readBigInt64BE(receivedAt) + PG_EPOCH_US_BIG, id: copy.readBigInt64BE(id) };
}

/**
 * The signed 64-bit integer at `at`, as a number rounded as Number(bigint) rounds it: the high
 * half times 2^32 is exact, so the sum is the only rounding.
 */
export function int64(copy: Buffer, at: number): number {
  return copy.readInt32BE(at) * TWO_32 + copy.readUInt32BE(at + 4);
}

/**
 * The binary timestamp at `at` in epoch milliseconds: floored, as the records' `timestamp`
 * (floor(extract(epoch FROM ts) * 1000)), or truncated, as their `receivedAt` (epoch µs ÷ 1000n).
 */
export function epochMs(copy: Buffer, at: number, floor: boolean): number {
  const high = copy.readInt32BE(at);
  // Within ±2^52.8 µs of 2000 (until the year 2250), epoch µs are exact as a number.
  if (high >= -0x1c0000 && high < 0x1c0000) {
    const us = high * TWO_32 + copy.readUInt32BE(at + 4) + PG_EPOCH_US;
    return floor ? Math.floor(us / 1000) : Math.trunc(us / 1000);
  }
  const us = copy.readBigInt64BE(at) + PG_EPOCH_US_BIG;
  const ms = us / 1000n;
  return Number(floor && us % 1000n < 0n ? ms - 1n : ms);
}

/**
 * The sealed ids (SEALED_EVENT_ID_BYTES each, in order) of the stored ids at `ids[i]` in
 * `copies[sources[i]]` (or in `copies[0]` without `sources`): one cipher call for them all.
 */
export function sealIds(
  secret: Buffer,
  appId: string,
  copies: readonly Buffer[],
  ids: ArrayLike<number>,
  count: number,
  sources?: ArrayLike<number>,
): Buffer {
  const blocks = Buffer.alloc(count * SEALED_EVENT_ID_BYTES);
  for (let i = 0; i < count; i++) {
    const copy = copies[sources ? sources[i] : 0];
    const from = ids[i];
    const to = i * SEALED_EVENT_ID_BYTES;
    for (let b = 0; b < 8; b++) blocks[to + b] = copy[from + b];
  }
  return sealEventIdBlocks(secret, appId, blocks);
}

/**
 * A payload from the older jsonb column ([from, from + length) of `copy`), as the driver presents
 * it: its text has spaces and jsonb's own key order, so it is parsed and written as
 * JSON.stringify writes it.
 */
export function jsonbPayload(copy: Buffer, from: number, length: number): string {
  return JSON.stringify(JSON.parse(copy.toString('utf8', from, from + length)) as unknown);
}
