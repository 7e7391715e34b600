/**
 * PostgreSQL's binary COPY format read as it arrives, for a statement whose values the caller
 * wants as bytes (a `bytea` of a text-format result comes back as hex text, twice its size,
 * which the driver turns into a string first). The layout (src/backend/commands/copyto.c):
 *
 *     11-byte signature, int32 flags, int32 header extension length, the extension;
 *     per tuple: int16 field count, then per field int32 byte length (-1 for NULL) and the bytes;
 *     int16 -1 to end.
 */

/** The 11 bytes every binary COPY starts with. */
export const COPY_SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');

function copyError(detail: string): Error {
  return new Error(`binary COPY: ${detail}`);
}

/**
 * Where the first tuple starts in the first `length` bytes of a binary COPY, or null while its
 * header is not all there. Throws when the bytes there are not a binary COPY's signature.
 */
export function copyHeaderEnd(copy: Buffer, length = copy.length): number | null {
  const signature = Math.min(length, COPY_SIGNATURE.length);
  if (!copy.subarray(0, signature).equals(COPY_SIGNATURE.subarray(0, signature))) {
    throw copyError('no signature');
  }
  if (length < COPY_SIGNATURE.length + 8) return null;
  const end = COPY_SIGNATURE.length + 8 + copy.readInt32BE(COPY_SIGNATURE.length + 4);
  return end <= length ? end : null;
}

/**
 * Where the tuple that starts at `at` ends, when all of it is within the first `length` bytes;
 * else null. `at` holds a tuple's field count (not the trailer's -1) and at least its two bytes
 * are there.
 */
export function tupleEnd(copy: Buffer, at: number, length: number): number | null {
  const count = copy.readInt16BE(at);
  let end = at + 2;
  for (let f = 0; f < count; f++) {
    if (length - end < 4) return null;
    end += 4 + Math.max(copy.readInt32BE(end), 0);
    if (end > length) return null;
  }
  return end;
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
      const start = copyHeaderEnd(pending);
      if (start === null) continue;
      at = start;
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
      const end = tupleEnd(pending, at, pending.length);
      if (end === null) break;
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
