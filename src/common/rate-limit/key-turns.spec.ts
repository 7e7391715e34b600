import { KeyTurns } from './key-turns';

/** Whether `promise` has settled once the microtasks queued so far have run. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(() => (done = true));
  await Promise.resolve();
  await Promise.resolve();
  return done;
}

describe('KeyTurns', () => {
  // Jest's fake clock drives setTimeout, setImmediate and performance.now alike, so the pauses
  // are checked to the millisecond instead of against the machine's timers.
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('gives a key one turn at a time, in arrival order; other keys do not wait', async () => {
    const turns = new KeyTurns();
    const order: string[] = [];
    await turns.take('a');
    const second = turns.take('a').then(() => order.push('a2'));
    const third = turns.take('a').then(() => order.push('a3'));
    await turns.take('b');
    order.push('b1');
    await jest.runOnlyPendingTimersAsync();
    expect(order).toEqual(['b1']);
    turns.release('a');
    await jest.runOnlyPendingTimersAsync();
    await second;
    expect(order).toEqual(['b1', 'a2']);
    turns.release('a');
    await jest.runOnlyPendingTimersAsync();
    await third;
    turns.release('a');
    turns.release('b');
    expect(order).toEqual(['b1', 'a2', 'a3']);
    expect(turns.size).toBe(0);
  });

  it('passes a released turn on only after other work waiting on the event loop', async () => {
    const turns = new KeyTurns();
    const order: string[] = [];
    await turns.take('k');
    const next = turns.take('k').then(() => order.push('next request of the key'));
    setImmediate(() => order.push('another app'));
    turns.release('k');
    await jest.runOnlyPendingTimersAsync();
    await next;
    expect(order).toEqual(['another app', 'next request of the key']);
    turns.release('k');
  });

  it('pauses a key after each turn in proportion to its cost: a share of 0.25 waits 3 times it', async () => {
    const turns = new KeyTurns();
    await turns.take('k');
    turns.release('k', 20, 0.25);
    const waiting = turns.take('k');
    await jest.advanceTimersByTimeAsync(59);
    expect(await settled(waiting)).toBe(false);
    await jest.advanceTimersByTimeAsync(1);
    expect(await settled(waiting)).toBe(true);
    // Without a cost there is no pause: the next turn comes on the next turn of the event loop.
    turns.release('k', 0, 0.25);
    const again = turns.take('k');
    await jest.advanceTimersByTimeAsync(0);
    expect(await settled(again)).toBe(true);
    turns.release('k');
    expect(turns.size).toBe(0);
  });

  it('caps the pause at one second and forgets an idle key once its pause is over', async () => {
    const turns = new KeyTurns();
    await turns.take('k');
    turns.release('k', 10_000, 0.001);
    expect(turns.size).toBe(1);
    await jest.advanceTimersByTimeAsync(999);
    expect(turns.size).toBe(1);
    await jest.advanceTimersByTimeAsync(1);
    expect(turns.size).toBe(0);
    // Taken once the pause is over, the turn is given at once.
    expect(await settled(turns.take('k'))).toBe(true);
    turns.release('k');
    expect(turns.size).toBe(0);
  });

  it('ignores a release without a turn', () => {
    const turns = new KeyTurns();
    turns.release('nobody');
    expect(turns.size).toBe(0);
  });
});
