import { ChunkBuffers } from './chunk-buffers';

describe('ChunkBuffers', () => {
  it('hands a given-back buffer out again, whole, to the next take that fits', () => {
    const buffers = new ChunkBuffers();
    const first = buffers.take(1000);
    expect(first.length).toBeGreaterThanOrEqual(1000);
    buffers.give(first.subarray(0, 10));
    const again = buffers.take(900);
    expect(again.buffer).toBe(first.buffer);
    expect(again.length).toBe(first.length);
  });

  it('takes the smallest free buffer that fits, and allocates when none does', () => {
    const buffers = new ChunkBuffers();
    const small = buffers.take(100);
    const large = buffers.take(10_000);
    buffers.give(large);
    buffers.give(small);
    expect(buffers.take(50).buffer).toBe(small.buffer);
    expect(buffers.take(50).buffer).toBe(large.buffer);
    const fresh = buffers.take(50);
    expect([small.buffer, large.buffer]).not.toContain(fresh.buffer);
  });

  it('never hands out a buffer twice for one give, nor one it did not make', () => {
    const buffers = new ChunkBuffers();
    const taken = buffers.take(100);
    buffers.give(taken);
    buffers.give(taken);
    buffers.give(Buffer.alloc(10_000));
    expect(buffers.take(100).buffer).toBe(taken.buffer);
    const next = buffers.take(100);
    expect(next.buffer).not.toBe(taken.buffer);
    expect(next.length).toBeLessThan(10_000);
  });

  it('keeps the three largest free buffers', () => {
    const buffers = new ChunkBuffers();
    const taken = [100, 200, 300, 400].map((n) => buffers.take(n));
    taken.forEach((b) => buffers.give(b));
    expect(buffers.take(1).buffer).toBe(taken[1].buffer);
    expect(buffers.take(1).buffer).toBe(taken[2].buffer);
    expect(buffers.take(1).buffer).toBe(taken[3].buffer);
    expect(buffers.take(1).buffer).not.toBe(taken[0].buffer);
  });
});
