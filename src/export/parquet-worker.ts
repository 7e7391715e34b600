import { Worker } from 'node:worker_threads';
import { builtWorkerFile } from '@app/common/worker-file';
import type { CopyChunk } from './export.service';

/**
 * The worker's heap (old generation). An export's encoder holds one row group (its byte bound,
 * export-parquet.ts) and a table of user keys; this leaves room for many exports at once.
 */
export const PARQUET_WORKER_HEAP_MB = 256;

export type EncodeRequest = { id: number; seq: number } & (
  | { op: 'open'; secret: Uint8Array; appId: string; userKeySecret: Uint8Array }
  | {
      op: 'add';
      /** The chunk's memory, transferred: it comes back in `released`. */
      buffer: ArrayBuffer;
      byteOffset: number;
      length: number;
      rows: number;
      /** Names the chunk in `released` once the worker no longer reads it. */
      token: number;
    }
  | { op: 'finish' }
  | { op: 'close' }
);

export type EncodeReply = { id: number; seq: number } & (
  | { bytes: Uint8Array | null; released: Released[]; workMs: number; error?: undefined }
  | { error: string; bytes?: undefined; released?: undefined; workMs?: undefined }
);

/** A chunk the worker no longer reads, and its memory, transferred back. */
export interface Released {
  token: number;
  buffer: ArrayBuffer;
}

/** What an encoding step gave: the bytes to send (if any) and the worker's time on it. */
export interface EncodeStep {
  bytes: Uint8Array | null;
  workMs: number;
}

interface Pending {
  resolve: (reply: EncodeReply & { error?: undefined }) => void;
  reject: (err: Error) => void;
}

/**
 * The instance's Parquet encoding thread, shared by its exports and started with the first one.
 * Encoding a row group takes tens of milliseconds of CPU, and as much again of garbage collection
 * for the buffers it goes through; on the server's thread, every request behind it waited that
 * long. Here the server's thread only reads the chunks and sends the encoded bytes. If the thread
 * stops (a fault, or its heap cap), the exports it served fail and the next export starts another.
 */
class EncodingThread {
  private worker: Worker | null = null;
  private readonly pending = new Map<string, Pending>();
  private nextId = 1;

  newId(): number {
    return this.nextId++;
  }

  send(request: EncodeRequest, transfer: ArrayBuffer[] = []): Promise<EncodeReply & { error?: undefined }> {
    const worker = this.started();
    return new Promise((resolve, reject) => {
      // Waited for, it keeps the process alive; idle, it does not.
      if (this.pending.size === 0) worker.ref();
      this.pending.set(`${request.id}:${request.seq}`, { resolve, reject });
      worker.postMessage(request, transfer);
    });
  }

  /** Stops the thread (the server's shutdown); running exports fail. */
  async stop(): Promise<void> {
    const worker = this.worker;
    this.worker = null;
    if (worker) await worker.terminate();
  }

  private started(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(builtWorkerFile(__dirname, 'parquet-encode.worker.js'), {
      resourceLimits: {
        maxOldGenerationSizeMb: PARQUET_WORKER_HEAP_MB,
      },
    });
    worker.unref();
    worker.on('message', (reply: EncodeReply) => {
      const key = `${reply.id}:${reply.seq}`;
      const waiting = this.pending.get(key);
      if (!waiting) return;
      this.pending.delete(key);
      if (this.pending.size === 0) worker.unref();
      if (reply.error !== undefined) waiting.reject(new Error(`export: ${reply.error}`));
      else waiting.resolve(reply);
    });
    const failed = (err: Error) => {
      if (this.worker === worker) this.worker = null;
      const waiting = [...this.pending.values()];
      this.pending.clear();
      for (const { reject } of waiting) reject(err);
    };
    worker.on('error', (err) => failed(new Error(`export: the Parquet encoder failed: ${err.message}`)));
    worker.on('exit', (code) => failed(new Error(`export: the Parquet encoder stopped (exit code ${code})`)));
    this.worker = worker;
    return worker;
  }
}

const thread = new EncodingThread();

/** Stops the encoding thread, if it runs. */
export function stopParquetWorker(): Promise<void> {
  return thread.stop();
}

/**
 * One export's Parquet file, encoded on the encoding thread (ParquetEncoder there). Each chunk's
 * memory moves to the thread (its ArrayBuffer transferred, not copied) and comes back once its
 * row group is written, when the chunk is released with it for the export's next reads. Nothing
 * is shared: what either thread drops, its own collector frees.
 */
export class OffThreadParquetEncoder {
  private readonly id = thread.newId();
  private seq = 0;
  private nextToken = 0;
  private readonly chunks = new Map<number, CopyChunk>();
  private readonly opened: Promise<unknown>;

  constructor(secret: Buffer, appId: string, userKeySecret: Buffer) {
    this.opened = this.send({
      op: 'open',
      secret: Uint8Array.from(secret),
      appId,
      userKeySecret: Uint8Array.from(userKeySecret),
    });
  }

  /** Takes a chunk; the bytes of the row group it completes, if any. */
  async add(chunk: CopyChunk): Promise<EncodeStep> {
    await this.opened;
    // A chunk whose memory is not its own alone (a part of Node's pool, say) goes as a copy.
    const moves = chunk.movable === true && chunk.copy.buffer instanceof ArrayBuffer;
    const copy = moves ? chunk.copy : new Uint8Array(chunk.copy);
    const { byteOffset, length } = copy;
    const buffer = copy.buffer as ArrayBuffer;
    const token = this.nextToken++;
    this.chunks.set(token, moves ? chunk : { ...chunk, release: () => chunk.release() });
    const request = { op: 'add', buffer, byteOffset, length, rows: chunk.rows, token } as const;
    return this.step(await this.send(request, [buffer]));
  }

  /** The last row group and the footer. */
  async finish(): Promise<EncodeStep & { bytes: Uint8Array }> {
    await this.opened;
    const reply = this.step(await this.send({ op: 'finish' }));
    return { bytes: reply.bytes ?? new Uint8Array(0), workMs: reply.workMs };
  }

  /** Drops the export's encoder (an export cut short); its chunks' memory comes back as garbage. */
  close(): void {
    this.chunks.clear();
    this.send({ op: 'close' }).catch(() => undefined);
  }

  private step(reply: EncodeReply & { error?: undefined }): EncodeStep {
    for (const { token, buffer } of reply.released) {
      this.chunks.get(token)?.release(buffer);
      this.chunks.delete(token);
    }
    return { bytes: reply.bytes, workMs: reply.workMs };
  }

  private send(request: { op: EncodeRequest['op'] } & Record<string, unknown>, transfer: ArrayBuffer[] = []) {
    return thread.send({ ...request, id: this.id, seq: this.seq++ } as EncodeRequest, transfer);
  }
}
