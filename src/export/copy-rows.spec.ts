import { binaryCopy, plainRow } from '@test/factories/export-copy';
import { completeRowsEnd, copyExtent } from './copy-rows';

const rows = (n: number) =>
  Array.from({ length: n }, (_, i) =>
    plainRow({
      id: BigInt(i + 1),
      eventId: `e-${i}`,
      payloadJson: `{"i":${i},"pad":"${'x'.repeat(100 * i)}"}`,
    }),
  );

describe('completeRowsEnd (where a cut binary COPY ends its last complete row)', () => {
  const whole = binaryCopy(rows(3));
  // Each row's end in `whole`: the COPY of the first k rows without its 2-byte trailer.
  const ends = [1, 2, 3].map((k) => binaryCopy(rows(3).slice(0, k)).length - 2);

  it('gives the end of the last row that is whole within the bytes, at every cut', () => {
    for (let length = 0; length < whole.length - 2; length++) {
      const complete = ends.filter((end) => end <= length);
      expect(completeRowsEnd(whole, length)).toBe(complete.length ? complete[complete.length - 1] : null);
    }
  });

  it('needs no cut for a COPY that holds its trailer', () => {
    expect(completeRowsEnd(whole, whole.length)).toBeNull();
  });

  it('makes a chunk of the complete rows once the trailer is written after them', () => {
    const cut = Buffer.alloc(ends[1] + 2);
    whole.copy(cut, 0, 0, ends[1]);
    cut.writeInt16BE(-1, completeRowsEnd(whole, ends[1] + 10)!);
    expect(copyExtent(cut).rows).toBe(2);
  });
});
