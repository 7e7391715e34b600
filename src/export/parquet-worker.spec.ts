import {
  APP_ID,
  binaryCopy,
  exportUserKeys,
  plainRow,
  SECRET,
  USER_KEY_SECRET,
} from '@test/factories/export-copy';
import { copyExtent } from './copy-rows';
import { PARQUET_ROW_GROUP_ROWS, ParquetEncoder } from './export-parquet';
import type { CopyChunk } from './export.service';
import { OffThreadParquetEncoder, stopParquetWorker } from './parquet-worker';

/** Rows of a few names, users and payloads, in order. */
const rows = (n: number, from = 0) =>
  Array.from({ length: n }, (_, k) => {
    const i = from + k;
    return plainRow({
      id: BigInt(i + 1),
      eventId: `e-${i}`,
      eventName: ['App.opened', 'Screen.viewed'][i % 2],
      anonymousUserId: `u-${i % 300}`,
      receivedUs: 1_795_478_400_000_000n + BigInt(i) * 1000n,
      payloadJson: i % 3 ? `{"step":${i % 9}}` : null,
    });
  });

/** A chunk as ExportService.copyChunks gives it: its memory its own (movable) or a part of Node's pool. */
function chunkOf(from: number, n: number, movable: boolean, released: unknown[]): CopyChunk {
  const bytes = binaryCopy(rows(n, from));
  const copy = movable ? Buffer.from(new Uint8Array(bytes).buffer) : bytes;
  return {
    copy,
    ...copyExtent(copy),
    movable,
    release: (moved?: ArrayBuffer) => released.push(moved ?? copy),
  };
}

afterAll(() => stopParquetWorker());

describe('OffThreadParquetEncoder (the Parquet file encoded on the encoding thread)', () => {
  it('sends the same bytes as the encoder on this thread, and hands each moved chunk back', async () => {
    const half = PARQUET_ROW_GROUP_ROWS / 2;
    const sizes = [half, half, half, 10];
    const expected: Uint8Array[] = [];
    const here = new ParquetEncoder(SECRET, APP_ID, exportUserKeys());
    let from = 0;
    for (const n of sizes) {
      const group = here.add(chunkOf(from, n, false, []));
      if (group) expected.push(group);
      from += n;
    }
    expected.push(here.finish());

    const released: unknown[] = [];
    const there = new OffThreadParquetEncoder(SECRET, APP_ID, USER_KEY_SECRET);
    const sent: Uint8Array[] = [];
    from = 0;
    for (const [i, n] of sizes.entries()) {
      const chunk = chunkOf(from, n, i % 2 === 0, released);
      const { bytes, workMs } = await there.add(chunk);
      expect(workMs).toBeGreaterThanOrEqual(0);
      if (bytes) sent.push(bytes);
      // A moved chunk's memory went to the thread (this view of it is detached), not a copy.
      expect(chunk.copy.length === 0).toBe(chunk.movable);
      from += n;
    }
    const last = await there.finish();
    sent.push(last.bytes);
    expect(Buffer.concat(sent).equals(Buffer.concat(expected))).toBe(true);
    // Every chunk released once; the moved ones with their memory, whole, back on this thread.
    expect(released).toHaveLength(sizes.length);
    const moved = released.filter((r) => r instanceof ArrayBuffer) as ArrayBuffer[];
    expect(moved).toHaveLength(2);
    for (const buffer of moved) expect(buffer.byteLength).toBeGreaterThan(0);
  });

  it('fails the export whose chunk it cannot read, and goes on serving the next one', async () => {
    const broken = new OffThreadParquetEncoder(SECRET, APP_ID, USER_KEY_SECRET);
    const garbage = Buffer.from('PGCOPY\n\xff\r\n\0 this is not a COPY body', 'latin1');
    await broken.add({ copy: garbage, rows: 3, last: null, release: () => undefined });
    // Its row group is read when it is written: here, at the end.
    await expect(broken.finish()).rejects.toThrow(/^export: /);
    const next = new OffThreadParquetEncoder(SECRET, APP_ID, USER_KEY_SECRET);
    const { bytes } = await next.finish();
    expect(Buffer.from(bytes.subarray(0, 4)).toString()).toBe('PAR1');
  });
});
