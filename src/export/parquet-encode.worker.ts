import { setPriority } from 'node:os';
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
});
