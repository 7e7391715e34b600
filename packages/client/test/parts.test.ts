// The client's pure parts, without timers or a network.
import { FlushWaiters, SendQueue, Slots, type Entry } from '../src/queue.js';
import { backoffDelay, decideRetry, isRetryable, type RetryPolicy } from '../src/retry.js';
import { onTerminationSignals } from '../src/signals.js';
import { BODY_OVERHEAD, bodyBytes, partition, planSplit } from '../src/split.js';

const policy: RetryPolicy = {
  maxAttempts: 5,
  maxRetryElapsedMs: 10_000,
  backoffBaseMs: 100,
  backoffMaxMs: 1000,
};
const failed = { status: 500, retryAfterMs: null, retry: 0, attempts: 1, elapsedMs: 0 };
const sized = (...bytes: number[]) => bytes.map((b, i) => ({ id: i, bytes: b }));

describe('retry rules', () => {
  it('retries no answer, 408, 429 and 5xx except 501 and 505', () => {
    expect([0, 408, 429, 500, 502, 503, 504].every(isRetryable)).toBe(true);
    expect([400, 401, 403, 404, 413, 415, 501, 505].some(isRetryable)).toBe(false);
  });

  it('backs off with full jitter, doubling per retry up to the maximum', () => {
    expect([0, 1, 2, 3, 4, 40].map((r) => backoffDelay(r, policy, 0.5))).toEqual([
      50, 100, 200, 400, 500, 500,
    ]);
    expect(backoffDelay(3, policy, 0)).toBe(0);
  });

  it('takes a Retry-After of a 429 or 503 as a pause for every request, and backs off otherwise', () => {
    expect(decideRetry({ ...failed, status: 429, retryAfterMs: 1000 }, policy, 0.5)).toEqual({
      kind: 'retry',
      delayMs: 1000,
      pause: true,
    });
    expect(decideRetry({ ...failed, status: 503, retryAfterMs: null, retry: 1 }, policy, 0.5)).toEqual({
      kind: 'retry',
      delayMs: 100,
      pause: false,
    });
    expect(decideRetry({ ...failed, status: 500, retryAfterMs: 1000 }, policy, 0.5)).toMatchObject({
      pause: false,
    });
  });

  it('fails on a final answer and gives up out of attempts or of time', () => {
    expect(decideRetry({ ...failed, status: 400 }, policy, 0.5)).toEqual({ kind: 'fail' });
    expect(decideRetry({ ...failed, attempts: 5 }, policy, 0.5)).toEqual({ kind: 'give-up' });
    expect(decideRetry({ ...failed, status: 429, retryAfterMs: 2000, elapsedMs: 8001 }, policy, 0.5)).toEqual(
      {
        kind: 'give-up',
      },
    );
  });
});

describe('413 splitting', () => {
  it('measures a body as the server does and partitions by events and bytes', () => {
    expect(bodyBytes(sized(10, 20))).toBe(BODY_OVERHEAD + 32);
    expect(partition(sized(1, 1, 1, 1, 1), 2, Infinity).map((p) => p.length)).toEqual([2, 2, 1]);
    expect(partition(sized(30, 30, 30), 10, BODY_OVERHEAD + 62).map((p) => p.length)).toEqual([2, 1]);
    // An event alone over the byte limit still makes a part of its own.
    expect(partition(sized(500, 1), 10, 100).map((p) => p.length)).toEqual([1, 1]);
  });

  it('cuts by the stated limits, halves when within them, and gives up on one event over the byte limit', () => {
    const batch = sized(10, 10, 10, 10, 10);
    expect(planSplit(batch, { limitEvents: 2 }).parts.map((p) => p.length)).toEqual([2, 2, 1]);
    expect(planSplit(batch, { limitEvents: 100, limitBytes: 10_000 }).parts.map((p) => p.length)).toEqual([
      3, 2,
    ]);
    expect(planSplit(batch, null)).toEqual({
      limitEvents: null,
      limitBytes: null,
      parts: [batch.slice(0, 3), batch.slice(3)],
    });
    expect(planSplit(sized(5000), { limitBytes: 1024 }).parts).toEqual([]);
    expect(planSplit(sized(10), { limitEvents: 0, limitBytes: 'x' })).toEqual({
      limitEvents: null,
      limitBytes: null,
      parts: [],
    });
  });
});

describe('send queue', () => {
  let seq = 0;
  const entry = (bytes: number): Entry => ({ id: `e${++seq}`, json: '{}', bytes, attempts: 0, seq });

  it('drops the oldest past its bounds, in events or in bytes', () => {
    const q = new SendQueue({ maxEvents: 2, maxBytes: 100 });
    const [a, b, c] = [entry(10), entry(10), entry(10)];
    expect(q.push(a)).toEqual([]);
    expect(q.push(b)).toEqual([]);
    expect(q.push(c)).toEqual([a]);
    expect(q.push(entry(95))).toEqual([b, c]);
    expect(q.length).toBe(1);
  });

  it('takes batches within the limits, sets oversized events apart, and takes split parts first', () => {
    const q = new SendQueue({ maxEvents: 100, maxBytes: 1e9 });
    const es = [entry(10), entry(500), entry(10), entry(10)];
    for (const e of es) q.push(e);
    const first = q.take(2, BODY_OVERHEAD + 30);
    expect(first).toEqual({ batch: [es[0], es[2]], oversized: [es[1]] });
    q.unshift(first.batch);
    expect(q.take(10, 1e9).batch).toEqual([es[0], es[2], es[3]]);
    expect(q.length).toBe(0);
  });

  it('resolves a flush() waiter once the events tracked before it have settled', async () => {
    const w = new FlushWaiters();
    let done = false;
    void w.wait(2, 2).then(() => (done = true));
    w.settled(3); // tracked after the flush() call: not counted
    w.settled(1);
    await Promise.resolve();
    expect(done).toBe(false);
    w.settled(2);
    await Promise.resolve();
    expect(done).toBe(true);
  });

  it('hands a released slot to the longest waiter before any new batch', async () => {
    const slots = new Slots(1);
    expect(slots.tryAcquire()).toBe(true);
    const order: string[] = [];
    void slots.acquire().then(() => order.push('first'));
    void slots.acquire().then(() => order.push('second'));
    expect(slots.tryAcquire()).toBe(false);
    slots.release();
    await Promise.resolve();
    expect(order).toEqual(['first']);
    expect(slots.free).toBe(false);
    slots.release();
    slots.release();
    await Promise.resolve();
    expect(order).toEqual(['first', 'second']);
    expect(slots.free).toBe(true);
  });
});

describe('termination signals', () => {
  /** A process double: records listeners and exit codes. */
  function fakeProcess() {
    const listeners = new Map<string, (() => void)[]>();
    const exits: number[] = [];
    return {
      exits,
      listeners,
      emit: (signal: string) => [...(listeners.get(signal) ?? [])].forEach((l) => l()),
      on: (signal: string, l: () => void) => listeners.set(signal, [...(listeners.get(signal) ?? []), l]),
      removeListener: (signal: string, l: () => void) =>
        listeners.set(
          signal,
          (listeners.get(signal) ?? []).filter((x) => x !== l),
        ),
      listenerCount: (signal: string) => (listeners.get(signal) ?? []).length,
      exit: ((code: number) => exits.push(code)) as (code: number) => never,
    };
  }

  it.each([
    ['SIGTERM', 143],
    ['SIGINT', 130],
  ])('on %s alone: shuts down, then exits with %i', async (signal, code) => {
    const proc = fakeProcess();
    let shutdowns = 0;
    onTerminationSignals(async () => void shutdowns++, proc);
    proc.emit(signal);
    await new Promise((r) => setImmediate(r));
    expect({ shutdowns, exits: proc.exits, left: proc.listenerCount(signal) }).toEqual({
      shutdowns: 1,
      exits: [code],
      left: 0,
    });
  });

  it('leaves the exit to an application listener of the signal, which runs once', async () => {
    const proc = fakeProcess();
    let app = 0;
    proc.on('SIGTERM', () => app++);
    let shutdowns = 0;
    onTerminationSignals(async () => void shutdowns++, proc);
    proc.emit('SIGTERM');
    await new Promise((r) => setImmediate(r));
    expect({ app, shutdowns, exits: proc.exits }).toEqual({ app: 1, shutdowns: 1, exits: [] });
  });
});
