import { sealEventIdBlocks, SEALED_EVENT_ID_BYTES, writePresentedEventId } from '@app/common/event-ids';
import { type EventRow, toEventRecord } from '@app/common/reads/event-record';
import { type ExportPosition, RAW_MARK } from './export.repository';

/**
 * The NDJSON export's lines. PostgreSQL writes each record's JSON text, with the fields, order
 * and number formatting of `JSON.stringify(toEventRecord(row))`, except the `id`: that needs
 * the app's id key, which stays in the server. It sends them as a binary COPY of
 * (received_at, id, line) rows (ExportRepository.ndjsonChunk); the server seals the ids of a
 * whole chunk in one cipher call and writes `{"id":"<presented id>",` followed by the line
 * after its opening brace. Nothing is parsed or built per row in JavaScript.
 *
 * A row the database cannot write byte for byte as the service would (see the repository)
 * comes as RAW_MARK followed by the EventRow as JSON, and is presented with `toEventRecord`.
 */

const COPY_SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
const ID_PREFIX = Buffer.from('{"id":"', 'latin1');
const PRESENTED_ID_CHARS = 22;
/**
 * A row of the binary COPY: a field count (2 bytes), then each field's length (4 bytes) and
 * value: received_at (8 bytes), id (8 bytes), the line. These 30 bytes and the line's `{` are
 * exactly as long as `{"id":"<22 characters>",`, so the finished line takes the place of the
 * row, and the rest of the line does not move.
 */
const FRAMING = 2 + 4 + 8 + 4 + 8 + 4;
const RECEIVED_AT = 2 + 4;
const ID = RECEIVED_AT + 8 + 4;
if (FRAMING + 1 !== ID_PREFIX.length + PRESENTED_ID_CHARS + 2) throw new Error('export: line layout');
const RAW = RAW_MARK.charCodeAt(0);
// PostgreSQL's binary timestamps count microseconds from 2000-01-01.
const PG_EPOCH_US = 946_684_800_000_000n;

/** A chunk ready to send: its bytes (in order), its row count, and where its last row is. */
export interface FinishedChunk {
  pieces: Buffer[];
  rows: number;
  last: ExportPosition | null;
  /** Milliseconds the server spent finishing it (for ./fair-share.ts). */
  workMs: number;
}

function copyError(detail: string): Error {
  return new Error(`export: unexpected COPY data (${detail})`);
}

/** Where the rows of a binary COPY start, and where they end (the trailer). */
function rowsOf(copy: Buffer): { starts: number[]; end: number } {
  if (copy.length < 19 || !copy.subarray(0, COPY_SIGNATURE.length).equals(COPY_SIGNATURE)) {
    throw copyError('no binary COPY header');
  }
  let at = 19 + copy.readInt32BE(15);
  const starts: number[] = [];
  for (;;) {
    const fields = copy.readInt16BE(at);
    if (fields === -1) break;
    if (fields !== 3 || copy.readInt32BE(at + RECEIVED_AT - 4) !== 8 || copy.readInt32BE(at + ID - 4) !== 8) {
      throw copyError('row shape');
    }
    const length = copy.readInt32BE(at + FRAMING - 4);
    if (length < 2) throw copyError('empty line');
    starts.push(at);
    at += FRAMING + length;
  }
  return { starts, end: at };
}

/** A raw row's line, presented as the service presents every record. */
function presentRaw(secret: Buffer, copy: Buffer, start: number, end: number): Buffer {
  const raw = JSON.parse(copy.toString('utf8', start + FRAMING + 1, end)) as EventRow;
  // row_to_json writes NaN and the infinities as strings; the driver would have parsed them.
  if (typeof raw.float_value === 'string') raw.float_value = parseFloat(raw.float_value);
  return Buffer.from(JSON.stringify(toEventRecord(secret, raw)) + '\n');
}

/**
 * Turns one chunk's binary COPY into NDJSON, in place: each row's framing becomes the start of
 * its line, with the presented id (all ids of the chunk sealed in one call). A raw row is
 * presented apart, and the bytes around it are sent as they are.
 */
export function finishCopy(secret: Buffer, appId: string, copy: Buffer): FinishedChunk {
  const started = performance.now();
  const { starts, end } = rowsOf(copy);
  const rows = starts.length;
  if (rows === 0) return { pieces: [], rows, last: null, workMs: 0 };
  const lastAt = starts[rows - 1];
  const last = {
    receivedUs: copy.readBigInt64BE(lastAt + RECEIVED_AT) + PG_EPOCH_US,
    id: copy.readBigInt64BE(lastAt + ID),
  };
  const blocks = Buffer.alloc(rows * SEALED_EVENT_ID_BYTES);
  for (let i = 0; i < rows; i++) {
    const from = starts[i] + ID;
    const to = i * SEALED_EVENT_ID_BYTES;
    for (let b = 0; b < 8; b++) blocks[to + b] = copy[from + b];
  }
  const sealed = sealEventIdBlocks(secret, appId, blocks);
  const pieces: Buffer[] = [];
  let kept = starts[0];
  for (let i = 0; i < rows; i++) {
    const at = starts[i];
    if (copy[at + FRAMING] === RAW) {
      const next = i + 1 < rows ? starts[i + 1] : end;
      if (at > kept) pieces.push(copy.subarray(kept, at));
      pieces.push(presentRaw(secret, copy, at, next));
      kept = next;
      continue;
    }
    ID_PREFIX.copy(copy, at);
    writePresentedEventId(sealed, i * SEALED_EVENT_ID_BYTES, copy, at + ID_PREFIX.length);
    copy[at + FRAMING - 1] = 0x22; // "
    copy[at + FRAMING] = 0x2c; // , (over the line's {)
  }
  if (end > kept) pieces.push(copy.subarray(kept, end));
  return { pieces, rows, last, workMs: performance.now() - started };
}
