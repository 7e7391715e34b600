import type { EventRow } from '@app/common/reads/event-record';
import { toEventRecord } from '@app/common/reads/event-record';
import { ParquetEncoder } from './export-parquet';
import { shareEventLoop } from './fair-share';
import type { FinishedChunk } from './ndjson-lines';

/**
 * NDJSON: one event record per line, exactly as GET /api/v1/events presents it. The lines come
 * finished from the database and ./ndjson-lines.ts; each chunk is sent as one piece, and the
 * event loop is handed back between pieces (./fair-share.ts).
 */
export async function* ndjsonBody(chunks: AsyncIterable<FinishedChunk>): AsyncGenerator<Buffer> {
  for await (const chunk of chunks) {
    for (const piece of chunk.pieces) yield piece;
    await shareEventLoop(chunk.workMs);
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
