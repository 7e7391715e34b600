import type { Writable } from 'node:stream';
import { ParquetEncoder } from './export-parquet';
import { shareEventLoop } from './fair-share';
import type { FinishedChunk } from './ndjson-lines';
import type { CopyChunk } from './export.service';

/** Bytes of an export's body, and what to do once the destination has taken them. */
export interface BodyPiece {
  bytes: Uint8Array;
  /** Called when the destination's write of `bytes` completed (their memory is then reused). */
  written?: () => void;
}

/**
 * NDJSON: one event record per line, exactly as GET /api/v1/events presents it. Each chunk's
 * lines are one piece, and the event loop is handed back between pieces (./fair-share.ts).
 */
export async function* ndjsonBody(chunks: AsyncIterable<FinishedChunk>): AsyncGenerator<BodyPiece> {
  for await (const chunk of chunks) {
    if (chunk.rows > 0) yield { bytes: chunk.lines, written: chunk.release };
    await shareEventLoop(chunk.workMs);
  }
}

/**
 * One Parquet file, sent row group by row group, and the event loop handed back after each
 * (./fair-share.ts).
 */
export async function* parquetBody(
  chunks: AsyncIterable<CopyChunk>,
  secret: Buffer,
  appId: string,
): AsyncGenerator<BodyPiece> {
  const encoder = new ParquetEncoder(secret, appId);
  for await (const chunk of chunks) {
    const started = performance.now();
    const group = encoder.add(chunk);
    if (group) {
      yield { bytes: group };
      await shareEventLoop(performance.now() - started);
    }
  }
  yield { bytes: encoder.finish() };
}

const closedEarly = () => new Error('export: the destination closed before the end');

/** Resolves on 'drain'; rejects when `target` fails or closes first (no 'drain' would come). */
function drained(target: Writable): Promise<void> {
  return new Promise((resolve, reject) => {
    if (target.destroyed) return reject(closedEarly());
    const settle = (err?: Error) => {
      target.off('drain', onDrain);
      target.off('close', onClose);
      target.off('error', settle);
      if (err) reject(err);
      else resolve();
    };
    const onDrain = () => settle();
    const onClose = () => settle(closedEarly());
    target.on('drain', onDrain);
    target.on('close', onClose);
    target.on('error', settle);
  });
}

/**
 * Writes the body into `target` piece by piece, waiting for it to drain whenever its buffer is
 * full, so that a slow reader slows the export down instead of making it buffer. Each piece's
 * `written` runs after its write completed. Does not end `target`. Rejects when `target` fails
 * or closes before the body's end.
 */
export async function writeBody(
  body: AsyncIterable<BodyPiece>,
  target: Writable,
  onPiece?: (bytes: number) => void,
): Promise<void> {
  for await (const { bytes, written } of body) {
    if (target.destroyed) throw closedEarly();
    const room = target.write(bytes, (err) => {
      if (!err) written?.();
    });
    onPiece?.(bytes.length);
    if (!room) await drained(target);
  }
}
