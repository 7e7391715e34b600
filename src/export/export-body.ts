import type { Writable } from 'node:stream';
import { ParquetEncoder } from './export-parquet';
import { ExportUserKeys } from './export-user-keys';
import { OffThreadParquetEncoder } from './parquet-worker';
import type { ExportPlan } from './export.service';
import { shareEventLoop } from './fair-share';
import type { FinishedChunk } from './ndjson-lines';
import type { CopyChunk, ExportBudget } from './export.service';

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

type ParquetPlan = Pick<ExportPlan, 'secret' | 'userKeySecret'> & { window: { appId: string } };

export interface ParquetOptions {
  /** Charged with the encoding's time, as the chunks' reads are. */
  budget?: ExportBudget;
  /**
   * Encode on the instance's encoding thread (./parquet-worker.ts), which the server does: its
   * requests never wait behind a row group. The chunks must then be read with `shared`.
   */
  offThread?: boolean;
}

/**
 * One Parquet file, sent row group by row group. On this thread, the event loop is handed back
 * after each row group (./fair-share.ts).
 */
export async function* parquetBody(
  chunks: AsyncIterable<CopyChunk>,
  plan: ParquetPlan,
  { budget, offThread = false }: ParquetOptions = {},
): AsyncGenerator<BodyPiece> {
  if (offThread) {
    yield* offThreadParquetBody(chunks, plan, budget);
    return;
  }
  const { appId } = plan.window;
  const encoder = new ParquetEncoder(plan.secret, appId, new ExportUserKeys(plan.userKeySecret, appId));
  for await (const chunk of chunks) {
    const started = performance.now();
    const group = encoder.add(chunk);
    if (group) {
      const workMs = performance.now() - started;
      budget?.charge(workMs);
      yield { bytes: group };
      await shareEventLoop(workMs);
    }
  }
  yield { bytes: encoder.finish() };
}

async function* offThreadParquetBody(
  chunks: AsyncIterable<CopyChunk>,
  plan: ParquetPlan,
  budget?: ExportBudget,
): AsyncGenerator<BodyPiece> {
  const encoder = new OffThreadParquetEncoder(plan.secret, plan.window.appId, plan.userKeySecret);
  let finished = false;
  try {
    for await (const chunk of chunks) {
      const { bytes, workMs } = await encoder.add(chunk);
      budget?.charge(workMs);
      if (bytes) yield { bytes };
    }
    const { bytes, workMs } = await encoder.finish();
    finished = true;
    budget?.charge(workMs);
    yield { bytes };
  } finally {
    if (!finished) encoder.close();
  }
}

/**
 * The most of a piece handed to the destination at once. The destination then holds at most
 * this much beyond its own buffer, and each 'drain' shows that the reader took this much: a
 * reader that takes nothing for the idle timeout is told apart from one that is slow.
 */
export const WRITE_SLICE_BYTES = 256 * 1024;

const closedEarly = () => new Error('export: the destination closed before the end');

/** The error of a destination that took nothing for `idleMs`. */
export class ExportIdleError extends Error {
  constructor(idleMs: number) {
    super(`export: the client read nothing for ${idleMs} ms`);
  }
}

/**
 * A timer that fires this much past its time (as a share of the timeout) saw a stalled process,
 * not an idle reader: timers run before the I/O that piled up meanwhile, so the reads the client
 * made during the stall are not seen yet.
 */
const STALLED_SHARE = 0.1;

/**
 * Resolves on 'drain'; rejects when `target` fails or closes first (no 'drain' would come), or
 * when the reader took nothing for `idleMs`: its buffered length did not fall, and the server's
 * own thread was running for that time, not stalled (a late timer starts a new window).
 */
function drained(target: Writable, idleMs?: number): Promise<void> {
  return new Promise((resolve, reject) => {
    if (target.destroyed) return reject(closedEarly());
    let timer: NodeJS.Timeout | undefined;
    let due = 0;
    let buffered = target.writableLength;
    const arm = () => {
      if (idleMs === undefined) return;
      due = performance.now() + idleMs;
      timer = setTimeout(check, idleMs);
    };
    const check = () => {
      const stalled = performance.now() - due > idleMs! * STALLED_SHARE;
      const left = target.writableLength;
      if (stalled || left < buffered) {
        buffered = left;
        return arm();
      }
      settle(new ExportIdleError(idleMs!));
    };
    const settle = (err?: Error) => {
      clearTimeout(timer);
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
    arm();
  });
}

export interface WriteOptions {
  /** Called with each piece's size once it is handed over (the CLI's progress). */
  onPiece?: (bytes: number) => void;
  /** Rejects with ExportIdleError when the destination took nothing for this long. */
  idleTimeoutMs?: number;
}

/**
 * Writes the body into `target` piece by piece, in slices of at most WRITE_SLICE_BYTES, waiting
 * for it to drain whenever its buffer is full, so that a slow reader slows the export down
 * instead of making it buffer. Each piece's `written` runs after its last write completed. Does
 * not end `target`. Rejects when `target` fails or closes before the body's end, or took
 * nothing for `idleTimeoutMs`.
 */
export async function writeBody(
  body: AsyncIterable<BodyPiece>,
  target: Writable,
  options: WriteOptions | ((bytes: number) => void) = {},
): Promise<void> {
  const { onPiece, idleTimeoutMs } = typeof options === 'function' ? { onPiece: options } : options;
  for await (const { bytes, written } of body) {
    for (let at = 0; ; at += WRITE_SLICE_BYTES) {
      if (target.destroyed) throw closedEarly();
      const end = Math.min(bytes.length, at + WRITE_SLICE_BYTES);
      const last = end === bytes.length;
      const room = target.write(bytes.subarray(at, end), (err) => {
        if (!err && last) written?.();
      });
      if (!room) await drained(target, idleTimeoutMs);
      if (last) break;
    }
    onPiece?.(bytes.length);
  }
}
