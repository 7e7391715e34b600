import { MemberList, varbitArray } from './member-bitmaps';

/** The elements of a binary varbit[] as strings of 0s and 1s (PostgreSQL's text form). */
function decode(array: Buffer): string[] {
  expect(array.readInt32BE(4)).toBe(0);
  expect(array.readInt32BE(8)).toBe(1562);
  if (array.readInt32BE(0) === 0) return [];
  expect(array.readInt32BE(0)).toBe(1);
  const count = array.readInt32BE(12);
  expect(array.readInt32BE(16)).toBe(1);
  const out: string[] = [];
  let at = 20;
  for (let i = 0; i < count; i++) {
    const length = array.readInt32BE(at);
    const bits = array.readInt32BE(at + 4);
    expect(length).toBe(4 + bits / 8);
    let text = '';
    for (let b = 0; b < bits; b++) text += (array[at + 8 + (b >> 3)] >> (7 - (b & 7))) & 1;
    out.push(text);
    at += 4 + length;
  }
  expect(at).toBe(array.length);
  return out;
}

describe('member bitmaps', () => {
  it('sets bit n for each member, in whole bytes up to the largest, whatever the order and repeats', () => {
    const list = new MemberList('17,0,9,9,17');
    expect(list.bytes).toBe(3);
    expect(decode(varbitArray([list]))).toEqual(['100000000100000001000000']);
  });

  it('gives B"" for no list, one byte for member 0, and the same bitmap as the SQL byte-wise form', () => {
    expect(new MemberList(null).bytes).toBe(0);
    // ('x' || '80')::varbit and ('x' || '0001')::varbit: a member's byte, gaps as zero bytes.
    expect(decode(varbitArray([new MemberList(null), new MemberList('0'), new MemberList('15')]))).toEqual([
      '',
      '10000000',
      '0000000000000001',
    ]);
  });

  it('encodes an empty array', () => {
    expect(decode(varbitArray([]))).toEqual([]);
    expect(varbitArray([]).length).toBe(12);
  });

  it('handles large numbers', () => {
    const list = new MemberList('123456789,3');
    expect(list.bytes).toBe(Math.floor(123456789 / 8) + 1);
    const array = varbitArray([list]);
    const base = 28;
    expect(array[base]).toBe(0x10);
    expect(array[base + (123456789 >> 3)]).toBe(0x80 >> (123456789 & 7));
  });
});
