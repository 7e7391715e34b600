import { MemberList } from './member-bitmaps';
import {
  byteaArray,
  decodeMembers,
  encodeMembers,
  MemberUnion,
  unionMembers,
  withoutMembers,
} from './member-lists';

const list = (members: number[]) => encodeMembers(Int32Array.from(members));

/** Repeatable pseudo-random draws below a bound, from `seed`. */
function draws(seed: number): (bound: number) => number {
  return (bound) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % bound;
  };
}

describe('member lists', () => {
  it('sorts, drops repeats and writes each gap minus one as a varint', () => {
    const encoded = encodeMembers(new MemberList('17,0,9,9,17,200').members);
    // 0 → 0; 9 → gap 8; 17 → gap 7; 200 → gap 182 = 0xb6 0x01 as LEB128.
    expect([...encoded]).toEqual([0, 8, 7, 0xb6, 0x01]);
    expect(decodeMembers(encoded)).toEqual([0, 9, 17, 200]);
  });

  it('gives the empty string of bytes for no members', () => {
    expect(encodeMembers(new MemberList(null).members).length).toBe(0);
    expect(decodeMembers(Buffer.alloc(0))).toEqual([]);
  });

  it('round-trips large numbers and long random sets', () => {
    expect(decodeMembers(list([2 ** 31 - 2, 3, 128, 16_384]))).toEqual([3, 128, 16_384, 2 ** 31 - 2]);
    const next = draws(7);
    const members = Array.from({ length: 5000 }, () => next(3_000_000));
    const expected = [...new Set(members)].sort((a, b) => a - b);
    expect(decodeMembers(list(members))).toEqual(expected);
  });

  it('joins two lists into the list of their members, repeats once', () => {
    expect(decodeMembers(unionMembers(list([0, 5, 300, 70_000]), list([5, 6, 299, 80_000])))).toEqual([
      0, 5, 6, 299, 300, 70_000, 80_000,
    ]);
    expect([...unionMembers(list([]), list([3]))]).toEqual([...list([3])]);
    expect([...unionMembers(list([1, 2]), list([]))]).toEqual([...list([1, 2])]);
    const next = draws(11);
    const draw = (n: number) => Array.from({ length: n }, () => next(200_000));
    const [x, y] = [draw(3000), draw(40)];
    expect([...unionMembers(list(y), list(x))]).toEqual([...list([...x, ...y])]);
  });

  it('counts the distinct members of several lists, and counts again after a reset', () => {
    const union = new MemberUnion();
    union.add(list([1, 5, 9]));
    union.add(list([5, 9, 1_000_000]));
    union.add(Buffer.alloc(0));
    expect(union.count).toBe(4);
    union.reset();
    expect(union.count).toBe(0);
    union.add(list([5, 7]));
    expect(union.count).toBe(2);
    union.reset();
    // A reset clears every mark: the same members count again.
    union.add(list([1, 5, 9, 1_000_000]));
    expect(union.count).toBe(4);
  });

  it('counts random lists of one to five bytes a gap exactly, growing its bitmap within a list', () => {
    const next = draws(11);
    const union = new MemberUnion();
    for (let row = 0; row < 3; row++) {
      const seen = new Set<number>();
      // Ranges that widen from list to list: each later list runs past the bitmap so far.
      for (let l = 1; l <= 12; l++) {
        const bound = l * 400_000 + (l % 3 === 0 ? 2 ** 28 : 0);
        const members = Array.from({ length: 300 + next(700) }, () => next(bound));
        for (const no of members) seen.add(no);
        union.add(list(members));
      }
      expect(union.count).toBe(seen.size);
      union.reset();
    }
  });

  it("counts gaps of one and two bytes in any mix, to the list's last byte, beside longer ones", () => {
    const next = draws(5);
    const union = new MemberUnion();
    const seen = new Set<number>();
    let from = 0;
    for (let l = 0; l < 40; l++) {
      // Gaps around 128, where one byte becomes two; every fifth list also jumps three bytes.
      const members: number[] = [];
      let no = from + next(300);
      for (let i = 0; i < 200 + next(200); i++) {
        members.push(no);
        no += 1 + next(260) + (i === 100 && l % 5 === 0 ? 40_000 : 0);
      }
      if (l % 2) members.push(no + 128); // a list that ends on a gap of two bytes
      for (const m of members) seen.add(m);
      union.add(list(members));
      from += 7_000;
      expect(union.count).toBe(seen.size);
    }
  });

  it('drops the removed members, and gives null when the list holds none of them', () => {
    const before = list([2, 40, 41, 9000]);
    expect(decodeMembers(withoutMembers(before, new Set([41, 9000, 12]))!)).toEqual([2, 40]);
    expect(withoutMembers(before, new Set([3, 9001]))).toBeNull();
    expect(withoutMembers(list([4]), new Set([4]))!.length).toBe(0);
  });

  it('lays out a binary bytea[] parameter', () => {
    const array = byteaArray([Buffer.from([1, 2]), Buffer.alloc(0)]);
    expect(array.readInt32BE(0)).toBe(1);
    expect(array.readInt32BE(8)).toBe(17);
    expect(array.readInt32BE(12)).toBe(2);
    expect(array.readInt32BE(20)).toBe(2);
    expect([...array.subarray(24, 26)]).toEqual([1, 2]);
    expect(array.readInt32BE(26)).toBe(0);
    expect(array.length).toBe(30);
    // No element: one dimension of length 0, which PostgreSQL reads as the empty array.
    const empty = byteaArray([]);
    expect(empty.length).toBe(20);
    expect(empty.readInt32BE(12)).toBe(0);
  });
});
