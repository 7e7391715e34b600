import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { type BodyPiece, ExportIdleError, WRITE_SLICE_BYTES, writeBody } from './export-body';

/** A destination that takes what it is given only when `read()` is called (a client's reads). */
class SlowReader extends Writable {
  received: Buffer[] = [];
  private waiting: (() => void)[] = [];

  constructor() {
    super({ highWaterMark: 16 * 1024 });
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: () => void): void {
    this.received.push(chunk);
    this.waiting.push(done);
  }

  /** Takes everything written so far. */
  read(): void {
    for (const done of this.waiting.splice(0)) done();
  }
}

async function* pieces(...sizes: number[]): AsyncGenerator<BodyPiece> {
  for (const [i, size] of sizes.entries()) yield { bytes: Buffer.alloc(size, i) };
}

describe('writeBody', () => {
  it('hands the destination slices of at most WRITE_SLICE_BYTES, and never more than one ahead of its reader', async () => {
    const target = new SlowReader();
    const writing = writeBody(pieces(2.5 * WRITE_SLICE_BYTES, 10), target);
    for (let i = 0; i < 3; i++) {
      await new Promise((resolve) => setImmediate(resolve));
      // Nothing more is written while the reader has not taken the last slice.
      expect(target.received).toHaveLength(i + 1);
      target.read();
    }
    await new Promise((resolve) => setImmediate(resolve));
    target.read();
    await writing;
    expect(target.received.map((part) => part.length)).toEqual([
      WRITE_SLICE_BYTES,
      WRITE_SLICE_BYTES,
      WRITE_SLICE_BYTES / 2,
      10,
    ]);
  });

  it('calls a piece written once its last slice was taken', async () => {
    const target = new SlowReader();
    const written = jest.fn();
    async function* one(): AsyncGenerator<BodyPiece> {
      yield { bytes: Buffer.alloc(WRITE_SLICE_BYTES + 1), written };
    }
    const writing = writeBody(one(), target);
    await new Promise((resolve) => setImmediate(resolve));
    target.read();
    await new Promise((resolve) => setImmediate(resolve));
    expect(written).not.toHaveBeenCalled();
    target.read();
    await writing;
    expect(written).toHaveBeenCalledTimes(1);
  });

  it('rejects with ExportIdleError when the destination took nothing for the idle timeout', async () => {
    const target = new SlowReader();
    const started = performance.now();
    await expect(writeBody(pieces(WRITE_SLICE_BYTES * 2), target, { idleTimeoutMs: 50 })).rejects.toThrow(
      ExportIdleError,
    );
    expect(performance.now() - started).toBeGreaterThanOrEqual(45);
  });

  it('starts a new window, not an error, when the idle timer fired late because the process itself stalled', async () => {
    const target = new SlowReader();
    const writing = writeBody(pieces(WRITE_SLICE_BYTES), target, { idleTimeoutMs: 50 });
    await new Promise((resolve) => setImmediate(resolve));
    // The thread is busy past the timeout; the reader's read is the first I/O after it.
    const until = performance.now() + 120;
    while (performance.now() < until);
    setImmediate(() => target.read());
    await expect(writing).resolves.toBeUndefined();
    expect(target.received).toHaveLength(1);
  });

  it('keeps a reader that takes part of what is buffered in each window, though no drain comes', async () => {
    // Takes bytes of the held chunk a few at a time: the buffered length falls, no write completes.
    const target = new SlowReader();
    const buffered = Object.getOwnPropertyDescriptor(Writable.prototype, 'writableLength')!.get!;
    let taken = 0;
    Object.defineProperty(target, 'writableLength', { get: () => (buffered.call(target) as number) - taken });
    const writing = writeBody(pieces(WRITE_SLICE_BYTES), target, { idleTimeoutMs: 40 });
    for (let i = 0; i < 6; i++) {
      await sleep(25);
      taken += 1024;
    }
    target.read();
    await expect(writing).resolves.toBeUndefined();
    expect(target.received).toHaveLength(1);
  });

  it('keeps writing to a reader that is slow but keeps reading', async () => {
    const target = new SlowReader();
    let writing = true;
    const reader = (async () => {
      while (writing) {
        await sleep(20);
        target.read();
      }
    })();
    try {
      await writeBody(pieces(WRITE_SLICE_BYTES * 6), target, { idleTimeoutMs: 60 });
    } finally {
      writing = false;
      await reader;
    }
    expect(target.received).toHaveLength(6);
  });
});
