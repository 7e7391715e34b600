/**
 * Sets of dense numbers as compact sorted lists, for the breakdowns' users and sessions.
 *
 * A value's users on one day are a few percent of the day's users at most, spread over every
 * number the app has given: as a bitmap that is one bit per user the app ever had (a million
 * bits for a million users) to hold a few thousand members. A list costs about a byte and a half
 * per member whatever the app's size, and a union over many days and values costs in proportion
 * to the members read (see MemberUnion), not to the app's history times the rows.
 *
 * The form (`bytea`): the members in ascending order, no repeats, each as an unsigned LEB128
 * varint of its distance from the previous one minus one (the first: its own value). The empty
 * set is the empty string of bytes.
 */
import { BinaryArrayWriter, ElementType } from '@app/database/binary-arrays';

/** Bytes of `value` as an unsigned LEB128 varint. */
function varintBytes(value: number): number {
  let bytes = 1;
  while (value >= 0x80) {
    value = Math.floor(value / 0x80);
    bytes++;
  }
  return bytes;
}

/**
 * The compact list of `numbers` (in any order, repeats allowed): sorted, repeats dropped, each
 * the varint of its gap minus one.
 */
export function encodeMembers(numbers: Int32Array): Buffer {
  const members = numbers.slice().sort();
  let size = 0;
  let previous = -1;
  for (let i = 0; i < members.length; i++) {
    const no = members[i];
    if (no === previous) continue;
    size += varintBytes(no - previous - 1);
    previous = no;
  }
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  previous = -1;
  for (let i = 0; i < members.length; i++) {
    const no = members[i];
    if (no === previous) continue;
    at = writeVarint(out, at, no - previous - 1);
    previous = no;
  }
  return out;
}

/** Writes `value` as an unsigned LEB128 varint at byte `at` of `out`; gives the byte after it. */
function writeVarint(out: Buffer, at: number, value: number): number {
  while (value >= 0x80) {
    out[at++] = (value & 0x7f) | 0x80;
    value = Math.floor(value / 0x80);
  }
  out[at++] = value;
  return at;
}

/** The first member of a non-empty compact list. */
function decodeFirst(list: Uint8Array): number {
  let value = 0;
  let scale = 1;
  for (let at = 0; at < list.length; at++) {
    value += (list[at] & 0x7f) * scale;
    if (!(list[at] & 0x80)) break;
    scale *= 0x80;
  }
  return value;
}

/**
 * Calls `each` with every member of a compact list, in ascending order; or with those after
 * member `previous`, whose gap starts at byte `at`.
 */
export function forEachMember(list: Uint8Array, each: (no: number) => void, at = 0, previous = -1): void {
  while (at < list.length) {
    let gap = 0;
    let scale = 1;
    let byte: number;
    do {
      byte = list[at++];
      gap += (byte & 0x7f) * scale;
      scale *= 0x80;
    } while (byte & 0x80 && at < list.length);
    previous += gap + 1;
    each(previous);
  }
}

/** The members of a compact list, in ascending order. */
export function decodeMembers(list: Uint8Array): number[] {
  const out: number[] = [];
  forEachMember(list, (no) => out.push(no));
  return out;
}

/**
 * The list of the members of both `a` and `b`, merged in one pass over each: the shorter list's
 * members are decoded, the longer one's gaps read and written again. A member's gap in the
 * union is never longer than in its own list, so the union takes at most both lists' bytes.
 */
export function unionMembers(a: Uint8Array, b: Uint8Array): Buffer {
  if (!a.length || !b.length) return Buffer.from(a.length ? a : b);
  const [long, short] = a.length >= b.length ? [a, b] : [b, a];
  const members = decodeMembers(short);
  const out = Buffer.allocUnsafe(a.length + b.length);
  let at = 0;
  let previous = -1;
  const put = (no: number) => {
    if (no === previous) return;
    at = writeVarint(out, at, no - previous - 1);
    previous = no;
  };
  let i = 0;
  forEachMember(long, (no) => {
    while (i < members.length && members[i] < no) put(members[i++]);
    put(no);
  });
  while (i < members.length) put(members[i++]);
  return out.subarray(0, at);
}

/**
 * The list without the members in `removed`, or null when it holds none of them (so that a
 * caller rewrites only the lists that change).
 */
export function withoutMembers(list: Uint8Array, removed: ReadonlySet<number>): Buffer | null {
  const kept: number[] = [];
  let dropped = false;
  forEachMember(list, (no) => {
    if (removed.has(no)) dropped = true;
    else kept.push(no);
  });
  return dropped ? encodeMembers(Int32Array.from(kept)) : null;
}

/**
 * Counts the distinct members of several lists: each list's members mark their bit in a bitmap
 * as long as the largest member seen, and a member counts when its bit was clear. `reset`
 * clears only the bytes marked, so one union serves every row of a read in turn.
 */
export class MemberUnion {
  private bits: Uint8Array = new Uint8Array(0);
  private low = Infinity;
  private high = -1;
  private counted = 0;

  /**
   * Marks the members of `list` (forEachMember's loop, written out: this is a read's hot loop,
   * about 6 million members for a 30-day breakdown by a 36-value dimension of a large app).
   * Gaps of one or two bytes, nearly all of them at the densities of a day's list, are decoded
   * from the next two bytes with no branch on which it is: whether a gap goes on to a second
   * byte varies from member to member, and a branch on it was mispredicted often enough to be
   * most of the loop's time. A longer gap, the list's last byte and a member past the bitmap's
   * end (which grows it) leave that loop for one member. A member counts by its old bit's value.
   */
  add(list: Uint8Array): void {
    const end = list.length;
    if (!end) return;
    // Members ascend: the list's marks run from its first member's byte to its last's.
    const first = decodeFirst(list) >> 3;
    if (first < this.low) this.low = first;
    const last = end - 1;
    let bits = this.bits;
    let counted = 0;
    let no = -1;
    let at = 0;
    for (;;) {
      const limit = bits.length;
      while (at < last) {
        const b0 = list[at];
        const b1 = list[at + 1];
        const more = b0 >> 7; // 1 when the gap goes on into b1
        if (more & (b1 >> 7)) break; // three bytes or more
        const next = no + ((b0 & 0x7f) | (((b1 & 0x7f) << 7) & -more)) + 1;
        const index = next >> 3;
        if (index >= limit) break;
        no = next;
        at += 1 + more;
        const bit = 7 - (no & 7);
        const old = bits[index];
        bits[index] = old | (1 << bit);
        counted += ((old >> bit) & 1) ^ 1;
      }
      if (at >= end) break;
      // One member whatever its length, the bitmap grown to hold it.
      let byte = list[at++];
      let gap = byte & 0x7f;
      for (let shift = 7; byte & 0x80 && at < end; shift += 7) {
        byte = list[at++];
        gap |= (byte & 0x7f) << shift;
      }
      no += gap + 1;
      const index = no >> 3;
      if (index >= bits.length) bits = this.grow(index + 1);
      const bit = 7 - (no & 7);
      const old = bits[index];
      bits[index] = old | (1 << bit);
      counted += ((old >> bit) & 1) ^ 1;
    }
    this.counted += counted;
    if (no >> 3 > this.high) this.high = no >> 3;
  }

  /** Distinct members marked since the last reset. */
  get count(): number {
    return this.counted;
  }

  reset(): void {
    if (this.high >= 0) this.bits.fill(0, this.low, this.high + 1);
    this.low = Infinity;
    this.high = -1;
    this.counted = 0;
  }

  private grow(bytes: number): Uint8Array {
    const bigger = new Uint8Array(Math.max(bytes, this.bits.length * 2));
    bigger.set(this.bits);
    this.bits = bigger;
    return bigger;
  }
}

/** `lists` as one binary `bytea[]` parameter (src/database/binary-arrays.ts). */
export function byteaArray(lists: readonly Uint8Array[]): Buffer {
  const writer = new BinaryArrayWriter(lists.reduce((sum, list) => sum + 4 + list.length, 20));
  writer.begin(ElementType.bytea, lists.length);
  for (const list of lists) writer.bytea(list);
  return writer.end().finish()[0];
}
