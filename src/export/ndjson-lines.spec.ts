import fc from 'fast-check';
import { presentEventId } from '@app/common/event-ids';
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
import { ChunkBuffers } from './chunk-buffers';
import { finishCopy } from './ndjson-lines';

const expectedLines = (rows: StoredRow[]) => rows.map((r) => JSON.stringify(exportRecord(r)) + '\n').join('');

const finished = (rows: StoredRow[]) => {
  const chunk = finishCopy(SECRET, APP_ID, binaryCopy(rows), exportUserKeys());
  return { ...chunk, text: chunk.lines.toString('utf8') };
};

describe('finishCopy (NDJSON lines from the binary COPY)', () => {
  it('writes each row exactly as JSON.stringify of its exported record, whatever the values', () => {
    fc.assert(
      fc.property(fc.array(storedRow, { minLength: 1, maxLength: 8 }), (rows) => {
        const chunk = finished(rows);
        expect(chunk.text).toBe(expectedLines(rows));
        expect(chunk.rows).toBe(rows.length);
        const last = rows[rows.length - 1];
        expect(chunk.last).toEqual({ receivedUs: last.receivedUs, id: last.id });
      }),
      { numRuns: 500 },
    );
  });

  it('writes the presented id, the window app, and a line per row', () => {
    const rows = [plainRow(), plainRow({ id: 43n, eventId: 'e-2' })];
    const lines = finished(rows).text.split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[2]).toBe('');
    const first = JSON.parse(lines[0]) as Record<string, unknown>;
    expect(first.id).toBe(presentEventId(SECRET, APP_ID, 42n));
    expect(first.appId).toBe(APP_ID);
    expect(first.receivedAt).toBe(1_795_478_400_123);
    expect(first.payload).toEqual({ plan: 'pro' });
  });

  it('escapes as JSON.stringify does and keeps multi-byte characters as they are', () => {
    const name = 'a"b\\c\n\t\u0001\u001f é😀\u2028/';
    const text = finished([plainRow({ eventName: name })]).text;
    expect(text).toContain(`"eventName":${JSON.stringify(name)},`);
    expect(text).toContain('"eventName":"a\\"b\\\\c\\n\\t\\u0001\\u001f é😀\u2028/"');
  });

  it('floors timestamp and truncates receivedAt before 1970, as the records do', () => {
    const text = finished([plainRow({ tsUs: -1_500n, receivedUs: -1_500n })]).text;
    expect(text).toContain('"timestamp":-2,"receivedAt":-1,');
  });

  it('writes floats as JavaScript prints them, and NaN, infinities as null, -0 as 0', () => {
    const values = [1e-7, 1e21, 0.1, -0, NaN, Infinity];
    const text = finished(values.map((floatValue, i) => plainRow({ id: BigInt(i + 1), floatValue }))).text;
    const printed = text
      .split('\n')
      .slice(0, -1)
      .map((line) => /"floatValue":([^,]*),/.exec(line)?.[1]);
    expect(printed).toEqual(['1e-7', '1e+21', '0.1', '0', 'null', 'null']);
  });

  it('presents the older jsonb payload as the driver parses it', () => {
    const text = finished([plainRow({ payloadJson: null, payloadJsonb: '{"b": 1, "a": [true, "x"]}' })]).text;
    expect(text).toContain('"payload":{"b":1,"a":[true,"x"]},"userKey":');
  });

  it('grows its buffer for rows of escaped text beyond the first estimate', () => {
    const rows = [plainRow({ eventName: '\u0001'.repeat(20_000), payloadJson: null })];
    expect(finished(rows).text).toBe(expectedLines(rows));
  });

  it("leaves a chunk's lines alone until they are released, then reuses their memory", () => {
    const buffers = new ChunkBuffers();
    const rows = (id: bigint) => [plainRow({ id }), plainRow({ id: id + 1n })];
    const first = finishCopy(SECRET, APP_ID, binaryCopy(rows(1n)), exportUserKeys(), buffers);
    const firstText = first.lines.toString();
    const second = finishCopy(SECRET, APP_ID, binaryCopy(rows(3n)), exportUserKeys(), buffers);
    expect(second.lines.buffer).not.toBe(first.lines.buffer);
    expect(first.lines.toString()).toBe(firstText);
    first.release();
    const third = finishCopy(SECRET, APP_ID, binaryCopy(rows(5n)), exportUserKeys(), buffers);
    expect(third.lines.buffer).toBe(first.lines.buffer);
    expect(third.lines.toString()).toBe(expectedLines(rows(5n)));
    expect(second.lines.toString()).toBe(expectedLines(rows(3n)));
  });

  it('gives no lines for an empty chunk, and refuses what is not a binary COPY of the columns', () => {
    expect(finished([])).toMatchObject({ text: '', rows: 0, last: null });
    expect(() => finishCopy(SECRET, APP_ID, Buffer.from('id\tname\n'), exportUserKeys())).toThrow(
      /no binary COPY header/,
    );
    const shortRow = binaryCopy([plainRow()]);
    shortRow.writeInt16BE(3, 19);
    expect(() => finishCopy(SECRET, APP_ID, shortRow, exportUserKeys())).toThrow(/row shape/);
  });
});
