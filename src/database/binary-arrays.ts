/**
 * One-dimensional PostgreSQL arrays in the binary wire format, for statement parameters.
 *
 * node-pg sends a Buffer parameter with the binary format code, and PostgreSQL then reads it with
 * the type's receive function (`array_recv`) instead of parsing a text literal (`array_in`): no
 * quoting or escaping on either side, uuids and numbers as fixed-size fields, timestamps without
 * a conversion in SQL. The layout (src/backend/utils/adt/arrayfuncs.c, `array_recv`):
 *
 *     int32 ndim = 1, int32 has-nulls flag, int32 element type oid, int32 length, int32 lower bound = 1
 *     then per element: int32 byte length (-1 for NULL) and the element's binary form
 *
 * Every array of one statement is written into one growing buffer; `finish()` returns each as a
 * view of it, so a statement costs one allocation rather than one per value.
 */

/** Element type oids (pg_type) of the arrays written here. */
export const ElementType = {
  bool: 16,
  bytea: 17,
  int8: 20,
  text: 25,
  float8: 701,
  timestamptz: 1184,
  uuid: 2950,
  json: 114,
} as const;

type ElementOid = (typeof ElementType)[keyof typeof ElementType];

const HEADER_BYTES = 20;
const TWO_32 = 4_294_967_296;
/** Unix epoch ms of 2000-01-01T00:00:00Z, PostgreSQL's timestamp epoch (binary timestamps count from it). */
export const PG_EPOCH_MS = 946_684_800_000;
/** A string this short is encoded by a JavaScript loop when it is ASCII: cheaper than a native call. */
const SHORT_STRING = 64;

export class BinaryArrayWriter {
  private buffer: Buffer;
  private offset = 0;
  private arrayStart = -1;
  private hasNulls = false;
  private readonly arrays: [start: number, end: number][] = [];

  constructor(initialBytes = 4096) {
    this.buffer = Buffer.allocUnsafe(Math.max(initialBytes, 64));
  }

  /** Starts the next array: `count` elements of type `oid` follow. */
  begin(oid: ElementOid, count: number): this {
    if (this.arrayStart >= 0) throw new Error('BinaryArrayWriter: end() the previous array first');
    this.ensure(HEADER_BYTES);
    this.arrayStart = this.offset;
    this.hasNulls = false;
    const b = this.buffer;
    let o = this.offset;
    o = b.writeInt32BE(1, o);
    o = b.writeInt32BE(0, o);
    o = b.writeInt32BE(oid, o);
    o = b.writeInt32BE(count, o);
    this.offset = b.writeInt32BE(1, o);
    return this;
  }

  /** Ends the current array. */
  end(): this {
    if (this.hasNulls) this.buffer.writeInt32BE(1, this.arrayStart + 4);
    this.arrays.push([this.arrayStart, this.offset]);
    this.arrayStart = -1;
    return this;
  }

  null(): this {
    this.ensure(4);
    this.offset = this.buffer.writeInt32BE(-1, this.offset);
    this.hasNulls = true;
    return this;
  }

  /** A `text` element: the string's UTF-8 bytes. */
  text(s: string | null): this {
    if (s === null) return this.null();
    this.ensure(4 + 3 * s.length);
    const start = this.offset + 4;
    const length = this.utf8(s, start);
    this.buffer.writeInt32BE(length, this.offset);
    this.offset = start + length;
    return this;
  }

  /** A `json` element: its binary form is the JSON text itself, which PostgreSQL checks and keeps. */
  json(json: string | null): this {
    return this.text(json);
  }

  /** An `int8` element; `n` must be an integer within ±2^53. */
  int8(n: number | null): this {
    if (n === null) return this.null();
    this.ensure(12);
    const b = this.buffer;
    let o = b.writeInt32BE(8, this.offset);
    const high = Math.floor(n / TWO_32);
    o = b.writeInt32BE(high, o);
    this.offset = b.writeUInt32BE(n - high * TWO_32, o);
    return this;
  }

  /** A `timestamptz` element from epoch milliseconds (whole microseconds are kept). */
  timestamptz(epochMs: number | null): this {
    return epochMs === null ? this.null() : this.int8(Math.round((epochMs - PG_EPOCH_MS) * 1000));
  }

  float8(n: number | null): this {
    if (n === null) return this.null();
    this.ensure(12);
    const o = this.buffer.writeInt32BE(8, this.offset);
    this.offset = this.buffer.writeDoubleBE(n, o);
    return this;
  }

  bool(v: boolean | null): this {
    if (v === null) return this.null();
    this.ensure(5);
    const o = this.buffer.writeInt32BE(1, this.offset);
    this.buffer[o] = v ? 1 : 0;
    this.offset = o + 1;
    return this;
  }

  /** A `bytea` element: the bytes as they are. */
  bytea(bytes: Uint8Array | null): this {
    if (bytes === null) return this.null();
    this.ensure(4 + bytes.length);
    const o = this.buffer.writeInt32BE(bytes.length, this.offset);
    this.buffer.set(bytes, o);
    this.offset = o + bytes.length;
    return this;
  }

  /** A `uuid` element from the 16 bytes `uuidBytes()` gives. */
  uuid(bytes: Buffer): this {
    this.ensure(20);
    const o = this.buffer.writeInt32BE(16, this.offset);
    bytes.copy(this.buffer, o, 0, 16);
    this.offset = o + 16;
    return this;
  }

  /** Every array written, in order, as views of one buffer. The writer is spent afterwards. */
  finish(): Buffer[] {
    if (this.arrayStart >= 0) throw new Error('BinaryArrayWriter: end() the last array first');
    return this.arrays.map(([start, end]) => this.buffer.subarray(start, end));
  }

  /** Writes `s` as UTF-8 at `at` (room for 3 bytes per UTF-16 unit is ensured); returns its length. */
  private utf8(s: string, at: number): number {
    const b = this.buffer;
    const n = s.length;
    if (n <= SHORT_STRING) {
      let i = 0;
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) break;
        b[at + i] = c;
      }
      if (i === n) return n;
    }
    return b.write(s, at, 'utf8');
  }

  private ensure(bytes: number): void {
    if (this.offset + bytes <= this.buffer.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.offset + bytes));
    this.buffer.copy(next, 0, 0, this.offset);
    this.buffer = next;
  }
}

/** The 16 bytes of a uuid in its canonical text form (8-4-4-4-12 hex digits). */
export function uuidBytes(uuid: string): Buffer {
  const hex = uuid.replace(/-/g, '');
  if (!/^[0-9a-fA-F]{32}$/.test(hex)) throw new Error(`not a uuid: ${uuid}`);
  return Buffer.from(hex, 'hex');
}
