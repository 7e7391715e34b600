/** How many free buffers an export keeps: one being read into, one being written, one spare. */
const KEPT = 3;

/**
 * The large buffers of one export, reused chunk after chunk. Each chunk of a large export needs
 * a few megabytes for its COPY data and as much again for its lines; allocated afresh, they are
 * memory outside V8's heap that makes it collect the whole heap every few chunks (130 full
 * collections in two 2,000,000-event exports, a fifth of the server's time). A buffer is given
 * back once nothing reads it any more: the COPY data once its lines are written, the lines once
 * the response (or file) has taken them.
 */
export class ChunkBuffers {
  private readonly free: Buffer[] = [];
  private readonly own = new WeakSet<ArrayBufferLike>();

  /** A buffer of at least `bytes` (the smallest free one that fits), its contents undefined. */
  take(bytes: number): Buffer {
    let best = -1;
    for (let i = 0; i < this.free.length; i++) {
      const size = this.free[i].length;
      if (size >= bytes && (best < 0 || size < this.free[best].length)) best = i;
    }
    if (best >= 0) return this.free.splice(best, 1)[0];
    // A little more than asked, so that the next chunk, a little larger, still fits.
    const buffer = Buffer.allocUnsafeSlow(Math.ceil(bytes * 1.25));
    this.own.add(buffer.buffer);
    return buffer;
  }

  /**
   * Takes back the memory of a buffer from `take` that was moved to a worker (its ArrayBuffer
   * transferred) and has come back as `moved`.
   */
  adopt(moved: ArrayBuffer): void {
    this.own.add(moved);
    this.give(Buffer.from(moved));
  }

  /**
   * Hands back a buffer from `take`, or a part of one, for reuse: the whole of it. Anything else
   * is left alone. The smallest is dropped when more than KEPT are free.
   */
  give(part: Buffer): void {
    if (!this.own.has(part.buffer)) return;
    const buffer = Buffer.from(part.buffer);
    if (this.free.some((free) => free.buffer === buffer.buffer)) return;
    this.free.push(buffer);
    if (this.free.length > KEPT) {
      this.free.sort((a, b) => b.length - a.length);
      this.free.length = KEPT;
    }
  }
}
