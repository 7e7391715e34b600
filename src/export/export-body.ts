import { setImmediate as nextTurn } from 'node:timers/promises';
import type { EventRow } from '@app/common/reads/event-record';
import { toEventRecord } from '@app/common/reads/event-record';
import { ParquetEncoder } from './export-parquet';

// Rows serialised between two turns of the event loop: an export shares its process with ingest
// and other reads, and hands the loop back every few milliseconds.
const ROWS_PER_TURN = 1_000;

/** NDJSON: one event record per line, exactly as GET /api/v1/events presents it. */
export async function* ndjsonBody(chunks: AsyncIterable<EventRow[]>): AsyncGenerator<string> {
  for await (const rows of chunks) {
    for (let start = 0; start < rows.length; start += ROWS_PER_TURN) {
      let text = '';
      const end = Math.min(rows.length, start + ROWS_PER_TURN);
      for (let i = start; i < end; i++) text += JSON.stringify(toEventRecord(rows[i])) + '\n';
      yield text;
      await nextTurn();
    }
  }
}

/** One Parquet file, sent row group by row group. */
export async function* parquetBody(chunks: AsyncIterable<EventRow[]>): AsyncGenerator<Uint8Array> {
  const encoder = new ParquetEncoder();
  for await (const rows of chunks) {
    for (const group of encoder.add(rows.map(toEventRecord))) {
      yield group;
      await nextTurn();
    }
  }
  yield encoder.finish();
}
