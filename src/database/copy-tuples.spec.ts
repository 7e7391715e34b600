import { readCopyTuples } from './copy-tuples';

const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');

/** A binary COPY of `tuples` (each field bytes or null), as PostgreSQL writes one. */
function copyOf(tuples: (Buffer | null)[][], extension = Buffer.alloc(0)): Buffer {
  const parts: Buffer[] = [SIGNATURE, Buffer.alloc(4), Buffer.alloc(4), extension];
  parts[2].writeInt32BE(extension.length);
  for (const fields of tuples) {
    const count = Buffer.alloc(2);
    count.writeInt16BE(fields.length);
    parts.push(count);
    for (const field of fields) {
      const length = Buffer.alloc(4);
      length.writeInt32BE(field ? field.length : -1);
      parts.push(length);
      if (field) parts.push(field);
    }
  }
  parts.push(Buffer.from([0xff, 0xff]));
  return Buffer.concat(parts);
}

async function* pieces(copy: Buffer, size: number): AsyncGenerator<Buffer> {
  for (let at = 0; at < copy.length; at += size) yield copy.subarray(at, at + size);
}

async function read(copy: Buffer, size: number): Promise<(string | null)[][]> {
  const out: (string | null)[][] = [];
  await readCopyTuples(pieces(copy, size), (fields) =>
    out.push(fields.map((f) => (f ? f.toString('hex') : null))),
  );
  return out;
}

describe('readCopyTuples', () => {
  const tuples = [
    [Buffer.from([0, 0, 0, 7]), Buffer.from('abc'), null],
    [Buffer.from([0, 0, 0, 8]), Buffer.alloc(0), Buffer.alloc(5000, 1)],
  ];
  const expected = tuples.map((fields) => fields.map((f) => (f ? f.toString('hex') : null)));

  it('gives every tuple whole, however the data is cut', async () => {
    const copy = copyOf(tuples, Buffer.from('ext'));
    for (const size of [1, 2, 3, 7, 19, 64, 4096, copy.length]) {
      expect({ size, tuples: await read(copy, size) }).toEqual({ size, tuples: expected });
    }
  });

  it('reads to the end after the callback throws, then rejects with what it threw', async () => {
    const seen: number[] = [];
    const source = pieces(copyOf(tuples), 16);
    let drained = false;
    async function* watched(): AsyncGenerator<Buffer> {
      yield* source;
      drained = true;
    }
    await expect(
      readCopyTuples(watched(), (fields) => {
        seen.push(fields[0]!.readInt32BE(0));
        throw new Error('no such row');
      }),
    ).rejects.toThrow('no such row');
    expect(seen).toEqual([7]);
    expect(drained).toBe(true);
  });

  it('gives nothing for a COPY of no rows', async () => {
    expect(await read(copyOf([]), 5)).toEqual([]);
  });

  it('rejects data without the signature, cut short, or past the trailer', async () => {
    const copy = copyOf(tuples);
    await expect(read(Buffer.concat([Buffer.from('x'), copy.subarray(1)]), 64)).rejects.toThrow(
      'no signature',
    );
    await expect(read(copy.subarray(0, copy.length - 3), 64)).rejects.toThrow('ends before its trailer');
    // Past the trailer, in the trailer's piece or in one after it.
    await expect(read(Buffer.concat([copy, Buffer.from([0])]), copy.length + 1)).rejects.toThrow(
      'data after the trailer',
    );
    await expect(read(Buffer.concat([copy, Buffer.from([0, 1])]), copy.length)).rejects.toThrow(
      'data after the trailer',
    );
  });
});
