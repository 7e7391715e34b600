import type { EventRow } from '@app/common/reads/event-record';
import { toEventRecord } from '@app/common/reads/event-record';
import { ParquetEncoder } from './export-parquet';

/** NDJSON: one event record per line, exactly as GET /api/v1/events presents it. */
export async function* ndjsonBody(chunks: AsyncIterable<EventRow[]>): AsyncGenerator<string> {
  for await (const rows of chunks) {
    let text = '';
    for (const row of rows) text += JSON.stringify(toEventRecord(row)) + '\n';
    yield text;
  }
}

/** One Parquet file, sent row group by row group. */
export async function* parquetBody(chunks: AsyncIterable<EventRow[]>): AsyncGenerator<Uint8Array> {
  const encoder = new ParquetEncoder();
  for await (const rows of chunks) {
    for (const group of encoder.add(rows.map(toEventRecord))) yield group;
  }
  yield encoder.finish();
}
