/**
 * PostgreSQL's binary COPY format read as it arrives, for a statement whose values the caller
 * wants as bytes (a `bytea` of a text-format result comes back as hex text, twice its size,
 * which the driver turns into a string first). The layout (src/backend/commands/copyto.c):
 *
 *     11-byte signature, int32 flags, int32 header extension length, the extension;
 *     per tuple: int16 field count, then per field int32 byte length (-1 for NULL) and the bytes;
 *     int16 -1 to end.
 */

const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');

function copyError(detail: string): Error {
  return new Error(`binary COPY: ${detail}`);
}

/**
 * Calls `tuple` with the fields of each tuple of `pieces` (the COPY's data as any chunks), in
 * order: each a view of the bytes (valid until the call returns) or null. Resolves once the
 * trailer is read; rejects on data that is not a binary COPY, or with the first error `tuple`
 * threw, once the rest is read (without calling `tuple` again).
 */
export async function readCopyTuples(
  pieces: AsyncIterable<Buffer>,
  tuple: (fields: (Buffer | null)[]) => void,
): Promise<void> {
  let pending: Buffer = Buffer.alloc(0);
  let headerRead = false;
  let ended = false;
  let failure: Error | undefined;
  for await (const piece of pieces) {
    pending = pending.length ? Buffer.concat([pending, piece]) : piece;
    let at = 0;
    if (!headerRead) {
      if (pending.length < SIGNATURE.length + 8) continue;
      if (!pending.subarray(0, SIGNATURE.length).equals(SIGNATURE)) throw copyError('no signature');
      const extension = pending.readInt32BE(SIGNATURE.length + 4);
      if (pending.length < SIGNATURE.length + 8 + extension) continue;
      at = SIGNATURE.length + 8 + extension;
      headerRead = true;
    }
    for (;;) {
      if (ended) throw copyError('data after the trailer');
      if (pending.length - at < 2) break;
      const count = pending.readInt16BE(at);
      if (count === -1) {
        ended = true;
        at += 2;
        break;
      }
      // Whether the whole tuple is here: walk its field lengths first.
      let end = at + 2;
      let complete = true;
      for (let f = 0; f < count; f++) {
        if (pending.length - end < 4) {
          complete = false;
          break;
        }
        const length = pending.readInt32BE(end);
        end += 4 + Math.max(length, 0);
        if (end > pending.length) {
          complete = false;
          break;
        }
      }
      if (!complete) break;
      const fields: (Buffer | null)[] = new Array<Buffer | null>(count);
      let p = at + 2;
      for (let f = 0; f < count; f++) {
        const length = pending.readInt32BE(p);
        p += 4;
        fields[f] = length < 0 ? null : pending.subarray(p, p + length);
        if (length > 0) p += length;
      }
      if (failure === undefined) {
        try {
          tuple(fields);
        } catch (err) {
          // Read on to the end: a COPY left half read would hold the connection.
          failure = err instanceof Error ? err : new Error(String(err));
        }
      }
      at = end;
    }
    pending = pending.subarray(at);
  }
  if (failure) throw failure;
  if (!ended) throw copyError('the data ends before its trailer');
  if (pending.length) throw copyError('data after the trailer');
}
