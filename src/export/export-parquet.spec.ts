import fc from 'fast-check';
import { ByteWriter, ParquetWriter } from 'hyparquet-writer';
import {
  APP_ID,
  binaryCopy,
  exportRecord,
  exportUserKeys,
  plainRow,
  SECRET,
  type StoredRow,
  storedRow,
} from '@test/factories/export-copy';
import { copyExtent } from './copy-rows';
import {
  type ExportRecord,
  PARQUET_COLUMNS,
  PARQUET_ROW_GROUP_BYTES,
  PARQUET_ROW_GROUP_ROWS,
  PARQUET_SCHEMA,
  ParquetEncoder,
  rowGroupComplete,
  writerOptions,
} from './export-parquet';
import type { CopyChunk } from './export.service';

const utf8 = (c: (typeof PARQUET_COLUMNS)[number], value: unknown) =>
  typeof value === 'string' && c.element.converted_type === 'UTF8' ? Buffer.from(value, 'utf8') : value;

/**
 * The file the writer makes from the event records themselves, as GET /api/v1/events presents
 * them, with the same schema, options and row groups: what the export must send, byte for byte.
 * Text goes in as its UTF-8 bytes, as the writer stores it: the writer sizes a string by its
 * UTF-16 length and bytes by their count when it weighs a dictionary, so strings of several-byte
 * characters could tip that choice where the same text as bytes does not (the values, and what
 * a reader gets, are the same either way).
 */
function fromRecords(records: ExportRecord[], groups: number[]): Buffer {
  const out = new ByteWriter();
  const writer = new ParquetWriter({
    writer: out,
    schema: PARQUET_SCHEMA,
    codec: 'SNAPPY',
    createdBy: 'tally',
  });
  let at = 0;
  for (const rows of groups) {
    const group = records.slice(at, (at += rows));
    void writer.write({
      columnData: PARQUET_COLUMNS.map((c) => ({
        ...writerOptions(c),
        data: group.map((record) => utf8(c, record[c.name])) as never[],
      })),
      rowGroupSize: rows,
    });
  }
  void writer.finish();
  return Buffer.from(out.getBytes());
}

const records = (rows: StoredRow[]) => rows.map(exportRecord);

/** A chunk as ExportService.copyChunks gives it, counting its releases. */
function chunkOf(rows: StoredRow[], released: Buffer[] = []): CopyChunk {
  const copy = binaryCopy(rows);
  return { copy, ...copyExtent(copy), release: () => released.push(copy) };
}

/** The export's bytes for `chunks`, as the response sends them. */
function encode(chunks: CopyChunk[], encoder = new ParquetEncoder(SECRET, APP_ID, exportUserKeys())): Buffer {
  const pieces: Uint8Array[] = [];
  for (const chunk of chunks) {
    const group = encoder.add(chunk);
    if (group) pieces.push(group);
  }
  pieces.push(encoder.finish());
  return Buffer.concat(pieces);
}

/** Splits rows into chunks at the given sizes (the rest in the last). */
function split(rows: StoredRow[], sizes: number[]): StoredRow[][] {
  const chunks: StoredRow[][] = [];
  let at = 0;
  for (const size of sizes) {
    if (at >= rows.length) break;
    chunks.push(rows.slice(at, (at += size)));
  }
  if (at < rows.length) chunks.push(rows.slice(at));
  return chunks;
}

/** Distinct rows in order: the n-th has id n, and its own event id and receive time. */
const numbered = (n: number, over: (i: number) => Partial<StoredRow> = () => ({})) =>
  Array.from({ length: n }, (_, i) =>
    plainRow({
      id: BigInt(i + 1),
      eventId: `e-${i}`,
      receivedUs: 1_795_478_400_000_000n + BigInt(i) * 1000n,
      ...over(i),
    }),
  );

describe('ParquetEncoder (a Parquet file from the binary COPY)', () => {
  it('writes the same file as the writer makes from the records, whatever the values', () => {
    fc.assert(
      fc.property(
        fc.array(storedRow, { minLength: 1, maxLength: 12 }),
        fc.array(fc.integer({ min: 1, max: 5 }), { maxLength: 4 }),
        (rows, sizes) => {
          const chunks = split(rows, sizes).map((chunk) => chunkOf(chunk));
          let expected: Buffer;
          try {
            expected = fromRecords(records(rows), [rows.length]);
          } catch (err) {
            // An event time past ±2^63 ms as a number (the record's) is refused alike.
            expect(() => encode(chunks)).toThrow((err as Error).message);
            return;
          }
          expect(encode(chunks).equals(expected)).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('writes a row group once its chunks reach PARQUET_ROW_GROUP_ROWS, and releases them then', () => {
    const rows = numbered(2.5 * PARQUET_ROW_GROUP_ROWS, (i) => ({
      eventName: ['App.opened', 'Screen.viewed', 'Search.used'][i % 3],
      anonymousUserId: `u-${i % 700}`,
      floatValue: i % 4 ? i / 8 : null,
      payloadJson: i % 5 ? `{"step":${i % 12}}` : null,
    }));
    const released: Buffer[] = [];
    const half = PARQUET_ROW_GROUP_ROWS / 2;
    const chunks = split(rows, Array<number>(5).fill(half)).map((chunk) => chunkOf(chunk, released));
    const encoder = new ParquetEncoder(SECRET, APP_ID, exportUserKeys());
    expect(encoder.add(chunks[0])).toBeNull();
    expect(released).toEqual([]);
    const first = encoder.add(chunks[1]);
    expect(first).toBeInstanceOf(Uint8Array);
    expect(released).toEqual([chunks[0].copy, chunks[1].copy]);
    const file = Buffer.concat([first!, encode(chunks.slice(2), encoder)]);
    expect(released).toHaveLength(5);
    const groups = [PARQUET_ROW_GROUP_ROWS, PARQUET_ROW_GROUP_ROWS, half];
    expect(file.equals(fromRecords(records(rows), groups))).toBe(true);
  });

  it('completes a row group at PARQUET_ROW_GROUP_ROWS rows or PARQUET_ROW_GROUP_BYTES bytes, whichever comes first', () => {
    expect(rowGroupComplete(PARQUET_ROW_GROUP_ROWS - 1, PARQUET_ROW_GROUP_BYTES - 1)).toBe(false);
    expect(rowGroupComplete(PARQUET_ROW_GROUP_ROWS, 1)).toBe(true);
    expect(rowGroupComplete(1, PARQUET_ROW_GROUP_BYTES)).toBe(true);
    // 10,000 small events (about 300 bytes of COPY each) still make one group.
    expect(rowGroupComplete(PARQUET_ROW_GROUP_ROWS - 1, (PARQUET_ROW_GROUP_ROWS - 1) * 300)).toBe(false);
  });

  it('writes a row group of large events once its chunks reach PARQUET_ROW_GROUP_BYTES, whatever their rows', () => {
    const payload = JSON.stringify({ blob: 'x'.repeat(29_000) });
    const rows = numbered(400, () => ({ payloadJson: payload }));
    const released: Buffer[] = [];
    // Chunks of 40 rows (1.2 MB each): a group is the first whole chunks that reach the bound.
    const chunks = split(rows, Array<number>(10).fill(40)).map((chunk) => chunkOf(chunk, released));
    const perGroup = Math.ceil(PARQUET_ROW_GROUP_BYTES / chunks[0].copy.length);
    const encoder = new ParquetEncoder(SECRET, APP_ID, exportUserKeys());
    const pieces: Uint8Array[] = [];
    chunks.forEach((chunk, i) => {
      const group = encoder.add(chunk);
      expect(group !== null).toBe((i + 1) % perGroup === 0);
      if (group) pieces.push(group);
    });
    expect(released).toHaveLength(Math.floor(10 / perGroup) * perGroup);
    pieces.push(encoder.finish());
    const groups = Array<number>(Math.floor(10 / perGroup)).fill(40 * perGroup);
    if (10 % perGroup) groups.push(40 * (10 % perGroup));
    expect(Buffer.concat(pieces).equals(fromRecords(records(rows), groups))).toBe(true);
  });

  it("keeps the footer's statistics when the chunks' buffers are reused for later chunks", () => {
    const rows = numbered(PARQUET_ROW_GROUP_ROWS + 10, (i) => ({
      eventName: i % 2 ? 'Zeta.event' : 'Alpha.event',
    }));
    const chunks = split(rows, [PARQUET_ROW_GROUP_ROWS]).map((chunk) => chunkOf(chunk));
    const encoder = new ParquetEncoder(SECRET, APP_ID, exportUserKeys());
    const first = encoder.add(chunks[0])!;
    // The first chunk's buffer holds another chunk's data before the footer is written.
    chunks[0].copy.fill(0x7a, 19);
    const file = Buffer.concat([first, encode(chunks.slice(1), encoder)]);
    expect(file.equals(fromRecords(records(rows), [PARQUET_ROW_GROUP_ROWS, 10]))).toBe(true);
  });

  it('names the payload JSON in the file, and writes an empty export as a file of no rows', () => {
    const payload = PARQUET_SCHEMA.find((element) => element.name === 'payload');
    expect(payload).toMatchObject({
      type: 'BYTE_ARRAY',
      converted_type: 'JSON',
      repetition_type: 'OPTIONAL',
    });
    const empty = encode([chunkOf([])]);
    expect(empty.equals(fromRecords([], []))).toBe(true);
    expect(empty.subarray(0, 4).toString()).toBe('PAR1');
    expect(empty.subarray(-4).toString()).toBe('PAR1');
  });

  it('presents the older jsonb payload as the driver parses it', () => {
    const rows = [plainRow({ payloadJson: null, payloadJsonb: '{"b": 1, "a": [true, "x"]}' })];
    expect(encode([chunkOf(rows)]).equals(fromRecords(records(rows), [1]))).toBe(true);
  });
});
