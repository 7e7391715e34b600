/**
 * Bitmaps over dense numbers, built in the process from the members the day's statement lists,
 * and handed to PostgreSQL as one binary `varbit[]` parameter.
 *
 * A list is the members' numbers in decimal, separated by commas (`string_agg(no::text, ',')`),
 * in any order, a member possibly listed more than once. Its bitmap has bit n set (bit 0 first,
 * the most significant bit of the first byte) when n is a member, and is as long as the whole
 * bytes up to the largest member: the same value the SQL `('x' || hex)::varbit` of the members'
 * bytes gives. No list (null) is the empty bitmap, B''.
 *
 * Setting a bit costs a few nanoseconds here, against a sort, a window and an aggregate per
 * member in SQL; the bitmap itself (one bit per number the app has given) is written once.
 */

/** PostgreSQL's type OID of `bit varying`, which the binary array format names. */
const VARBIT_OID = 1562;

const COMMA = 44;
const ZERO = 48;

/** A list's members, parsed once. */
export class MemberList {
  readonly members: Int32Array;
  /** Bytes of the bitmap: whole bytes up to the largest member (0 for none). */
  readonly bytes: number;

  constructor(list: string | null) {
    if (!list) {
      this.members = new Int32Array(0);
      this.bytes = 0;
      return;
    }
    // At most one member per two characters ("1,2,3"); the array is cut to the count at the end.
    const members = new Int32Array((list.length >> 1) + 1);
    let n = 0;
    let value = 0;
    let max = 0;
    for (let i = 0; i < list.length; i++) {
      const ch = list.charCodeAt(i);
      if (ch === COMMA) {
        members[n++] = value;
        if (value > max) max = value;
        value = 0;
      } else {
        value = value * 10 + (ch - ZERO);
      }
    }
    members[n++] = value;
    if (value > max) max = value;
    this.members = members.subarray(0, n);
    this.bytes = (max >> 3) + 1;
  }
}

/**
 * The bitmaps of `lists`, in order, as PostgreSQL's binary form of a one-dimensional `varbit[]`
 * (`array_recv`: dimensions, element type, then each element's length and `varbit_recv` form,
 * its length in bits and its bytes). Pass it as the value of a `$n::varbit[]` parameter: the
 * driver sends a Buffer in binary.
 */
export function varbitArray(lists: readonly MemberList[]): Buffer {
  const header = lists.length ? 20 : 12;
  const total = lists.reduce((sum, list) => sum + 8 + list.bytes, header);
  const out = Buffer.alloc(total);
  out.writeInt32BE(lists.length ? 1 : 0, 0);
  out.writeInt32BE(0, 4); // no NULL element
  out.writeInt32BE(VARBIT_OID, 8);
  if (!lists.length) return out;
  out.writeInt32BE(lists.length, 12);
  out.writeInt32BE(1, 16); // lower bound
  let at = header;
  for (const { members, bytes } of lists) {
    out.writeInt32BE(4 + bytes, at);
    out.writeInt32BE(bytes * 8, at + 4);
    const base = at + 8;
    for (let i = 0; i < members.length; i++) {
      const no = members[i];
      out[base + (no >> 3)] |= 0x80 >> (no & 7);
    }
    at += 8 + bytes;
  }
  return out;
}
