import type { EventRow } from '@app/common/reads/event-record';
import { toEventRecord } from '@app/common/reads/event-record';
import { ParquetEncoder } from './export-parquet';
import { shareEventLoop } from './fair-share';

// Rows serialised between two turns of the event loop: an export shares its process with ingest
// and other reads, and hands the loop back every few milliseconds.
const ROWS_PER_TURN = 1_000;

/** NDJSON: one event record per line, exactly as GET /api/v1/events presents it. */
export async function* ndjsonBody(chunks: AsyncIterable<EventRow[]>, secret: Buffer): AsyncGenerator<string> {
  for await (const rows of chunks) {
    for (let start = 0; start < rows.length; start += ROWS_PER_TURN) {
      const started = performance.now();
      let text = '';
      const end = Math.min(rows.length, start + ROWS_PER_TURN);
      for (let i = start; i < end; i++) text += JSON.stringify(toEventRecord(secret, rows[i])) + '\n';
      const workMs = performance.now() - started;
      yield text;
      await shareEventLoop(workMs);
    }
  }
}

/** One Parquet file, sent row group by row group. */
export async function* parquetBody(
  chunks: AsyncIterable<EventRow[]>,
  secret: Buffer,
): AsyncGenerator<Uint8Array> {
  const encoder = new ParquetEncoder();
  for await (const rows of chunks) {
    const started = performance.now();
    const groups = encoder.add(rows.map((row) => toEventRecord(secret, row)));
    const workMs = performance.now() - started;
    for (const group of groups) {
      yield group;
      await shareEventLoop(workMs);
    }
  }
  yield encoder.finish();
}
