import { setPriority } from 'node:os';
import { getHeapStatistics } from 'node:v8';
import { parentPort } from 'node:worker_threads';
import { ParquetEncoder } from './export-parquet';
import { ExportUserKeys } from './export-user-keys';
import type { EncodeReply, EncodeRequest, Released } from './parquet-worker';

// Below the server's own thread (on Linux a thread's nice value is its own): when the machine is
// busy, the encoding waits for the cores, not the requests.
try {
  setPriority(10);
} catch {
  // Not permitted here: the encoding runs at the server's priority.
}

// A row group goes through about three times its size in buffers (pages, their compression, the
// bytes sent), which V8 frees only once some 64 MB of them are garbage: with the server's thread
// holding as much again, an export of large events grew the process by 158 MB. Those buffers
// live for one row group, so after each one a minor collection (of the young generation, where
// they still are: about a millisecond, this thread's heap being small) frees them, and a full one
// follows in the rare case that more than GARBAGE_BYTES outlived it.
const GARBAGE_BYTES = 16 * 1_048_576;
const gc = (globalThis as { gc?: (options: { type: 'minor' | 'major' }) => void }).gc;
function collect(): void {
  if (!gc) return;
  gc({ type: 'minor' });
  if (getHeapStatistics().external_memory > GARBAGE_BYTES) gc({ type: 'major' });
}

// The Parquet encoders of the instance's running exports (parquet-worker.ts), by export. Each
// chunk's memory arrives transferred and goes back (in `released`, transferred again) once its
// row group is written, or its export is closed: the export's next reads reuse it.
const encoders = new Map<number, ParquetEncoder>();
/** The chunks released while the current message is answered (an encoder releases earlier ones). */
let released: Released[] = [];

function answer(request: EncodeRequest): EncodeReply {
  const { id, seq } = request;
  released = [];
  const started = performance.now();
  let bytes: Uint8Array | null = null;
  switch (request.op) {
    case 'open': {
      const secret = Buffer.from(request.secret);
      const userKeys = new ExportUserKeys(Buffer.from(request.userKeySecret), request.appId);
      encoders.set(id, new ParquetEncoder(secret, request.appId, userKeys));
      break;
    }
    case 'add': {
      const { buffer, byteOffset, length, rows, token } = request;
      const copy = Buffer.from(buffer, byteOffset, length);
      const release = () => released.push({ token, buffer });
      bytes = encoderOf(id).add({ copy, rows, last: null, release });
      break;
    }
    case 'finish':
      bytes = encoderOf(id).finish();
      encoders.delete(id);
      break;
    case 'close':
      encoders.get(id)?.abandon();
      encoders.delete(id);
      break;
  }
  return { id, seq, bytes, released, workMs: performance.now() - started };
}

function encoderOf(id: number): ParquetEncoder {
  const encoder = encoders.get(id);
  if (!encoder) throw new Error(`export ${id} has no Parquet encoder`);
  return encoder;
}

parentPort!.on('message', (request: EncodeRequest) => {
  let reply: EncodeReply;
  try {
    reply = answer(request);
  } catch (err) {
    encoders.delete(request.id);
    reply = { id: request.id, seq: request.seq, error: (err as Error).message };
  }
  const transfer = (reply.released ?? []).map((r) => r.buffer);
  if (reply.bytes) transfer.push(reply.bytes.buffer as ArrayBuffer);
  parentPort!.postMessage(reply, transfer);
  if (reply.bytes) collect();
});
