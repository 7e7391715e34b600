import { KeyTurns } from './key-turns';

const tick = () => new Promise((resolve) => setImmediate(resolve));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('KeyTurns', () => {
  it('gives a key one turn at a time, in arrival order; other keys do not wait', async () => {
    const turns = new KeyTurns();
    const order: string[] = [];
    await turns.take('a');
    const second = turns.take('a').then(() => order.push('a2'));
    const third = turns.take('a').then(() => order.push('a3'));
    await turns.take('b');
    order.push('b1');
    await tick();
    expect(order).toEqual(['b1']);
    turns.release('a');
    await second;
    expect(order).toEqual(['b1', 'a2']);
    turns.release('a');
    await third;
    turns.release('a');
    turns.release('b');
    expect(order).toEqual(['b1', 'a2', 'a3']);
    await sleep(5);
    expect(turns.size).toBe(0);
  });

  it('passes a released turn on only after other work waiting on the event loop', async () => {
    const turns = new KeyTurns();
    const order: string[] = [];
    await turns.take('k');
    const next = turns.take('k').then(() => order.push('next request of the key'));
    setImmediate(() => order.push('another app'));
    turns.release('k');
    await next;
    expect(order).toEqual(['another app', 'next request of the key']);
    turns.release('k');
  });

  it('pauses a key after each turn in proportion to its cost: a share of 0.25 waits 3 times it', async () => {
    const turns = new KeyTurns();
    await turns.take('k');
    turns.release('k', 20, 0.25);
    const started = performance.now();
    await turns.take('k');
    // 60 ms of pause; timers may fire a little early or late.
    expect(performance.now() - started).toBeGreaterThanOrEqual(55);
    turns.release('k', 0, 0.25);
    // Without a cost there is no pause.
    const again = performance.now();
    await turns.take('k');
    expect(performance.now() - again).toBeLessThan(50);
    turns.release('k');
    expect(turns.size).toBe(0);
  });

  it('caps the pause at one second and forgets an idle key once its pause is over', async () => {
    const turns = new KeyTurns();
    await turns.take('k');
    turns.release('k', 10_000, 0.001);
    expect(turns.size).toBe(1);
    const waited = turns.take('k', performance.now() + 1_000);
    // Taken as if a second later: the pause is over, so the turn is given at once.
    await expect(Promise.race([waited.then(() => 'given'), sleep(50).then(() => 'waiting')])).resolves.toBe(
      'given',
    );
    turns.release('k');
    expect(turns.size).toBe(0);
  });

  it('ignores a release without a turn', () => {
    const turns = new KeyTurns();
    turns.release('nobody');
    expect(turns.size).toBe(0);
  });
});
