import type { AppConfig } from '@app/config/config';
import { AppError } from '@app/common/app-error';
import { CpuMeter, DEFAULT_MS_PER_BYTE, IngestCpuBudgets } from './ingest-cpu.budget';

const budgets = (ms: number) => new IngestCpuBudgets({ ingestCpuMsPerSecond: ms } as AppConfig);

describe('IngestCpuBudgets turns', () => {
  // Jest's fake clock drives the pause's timer and performance.now alike.
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  /** The 429 a request of the key gets now (not held), or null when it is admitted. */
  const refusalOf = async (b: IngestCpuBudgets, key: string, bytes?: number): Promise<AppError | null> => {
    const refused = b.refusal(key);
    if (refused !== null) return refused.error;
    await b.enter(key, bytes);
    return null;
  };

  it("takes a key's requests in arrival order, one turn at a time", async () => {
    const b = budgets(1000);
    const meters = [await b.enter('k'), await b.enter('k'), await b.enter('k')];
    const order: number[] = [];
    const turns = meters.map((m, i) => m.beginTurn().then(() => order.push(i)));
    await jest.advanceTimersByTimeAsync(0);
    expect(order).toEqual([0]);
    for (const m of meters) {
      m.endTurn();
      await jest.advanceTimersByTimeAsync(0);
    }
    await Promise.all(turns);
    expect(order).toEqual([0, 1, 2]);
  });

  it('runs a key alone back to back, however much its turns cost', async () => {
    const b = budgets(10);
    const first = await b.enter('k');
    const second = await b.enter('k');
    await first.beginTurn();
    const turn = second.beginTurn();
    first.ms = 500;
    first.endTurn();
    // Its next turn comes on the next turn of the event loop, with no pause.
    await jest.advanceTimersByTimeAsync(0);
    await expect(turn).resolves.toBeUndefined();
    second.ms = 500;
    second.endTurn();
    // Nor is it refused, whatever waits: 20 bodies of 1 MB admitted at once.
    for (let i = 0; i < 20; i++) expect(await refusalOf(b, 'k', 1 << 20)).toBeNull();
  });

  it('contended, follows each turn with a pause that holds the key to its share', async () => {
    const b = budgets(100);
    // Another app's request on the instance: k is contended, and its share (10 %) binds.
    await b.enter('other');
    const first = await b.enter('k');
    const second = await b.enter('k');
    await first.beginTurn();
    let started = false;
    const turn = second.beginTurn().then(() => (started = true));
    first.ms = 10;
    first.endTurn();
    // 10 ms of CPU at 10 %: the next turn 90 ms later.
    await jest.advanceTimersByTimeAsync(89);
    expect(started).toBe(false);
    await jest.advanceTimersByTimeAsync(1);
    await turn;
    expect(started).toBe(true);
  });

  it('contended, refuses a request once the waiting work would take past the drain bound, with Retry-After of the drain time', async () => {
    const b = budgets(10);
    await b.enter('other');
    // A body of 1 MiB is expected to cost 16 ms at the default rate: 16 ms and its pause at a
    // share of 1 % (capped at 1 s) make 1,016 ms to drain.
    const big = await b.enter('k', 1 << 20);
    expect(b.drainMs('k')).toBeCloseTo((1 << 20) * DEFAULT_MS_PER_BYTE + 1000, 6);
    const refused = await refusalOf(b, 'k', 1000);
    expect(refused).toBeInstanceOf(AppError);
    expect(refused).toEqual(expect.objectContaining({ code: 'rate_limited' }));
    expect(refused!.options.extra).toEqual({ limitCpuMsPerSecond: 10 });
    // Refused before its body is read: the connection is closed.
    expect(refused!.options.headers).toEqual({ 'Retry-After': '2', Connection: 'close' });

    // The admitted one is served: it waited for its turn, and is not refused there.
    await big.beginTurn();
    big.ms = 4;
    big.endTurn();
    b.charge('k', big);
    // What is left is the pause after that turn: 4 ms at 1 % is 396 ms, past the bound.
    expect(b.drainMs('k')).toBeCloseTo(396, 6);
    expect((await refusalOf(b, 'k', 1000))!.options.headers).toEqual({
      'Retry-After': '1',
      Connection: 'close',
    });
    await jest.advanceTimersByTimeAsync(146);
    // 250 ms left: within the bound.
    await b.enter('other');
    expect(await refusalOf(b, 'k', 1000)).toBeNull();
  });

  it('holds a refusal for as long as the waiting work stays past the bound, at most 1 s', async () => {
    const b = budgets(100);
    await b.enter('other');
    const first = await b.enter('k');
    await first.beginTurn();
    // 40 ms at 10 %: a pause of 360 ms, 110 ms past the bound.
    first.ms = 40;
    first.endTurn();
    let answered = false;
    const refused = b.enter('k', 1000).catch((err: unknown) => {
      answered = true;
      return err;
    });
    await jest.advanceTimersByTimeAsync(109);
    expect(answered).toBe(false);
    await jest.advanceTimersByTimeAsync(1);
    expect(await refused).toEqual(expect.objectContaining({ code: 'rate_limited' }));
    // Far past the bound, the hold stops at 1 s: behind a body of 100 MiB (1.6 s expected at the
    // default rate, and its pause), a request is answered 1 s later.
    await b.enter('m', 100 << 20);
    let heldFor: number | null = null;
    const start = performance.now();
    const capped = b.enter('m', 1000).catch(() => (heldFor = performance.now() - start));
    await jest.advanceTimersByTimeAsync(999);
    expect(heldFor).toBeNull();
    await jest.advanceTimersByTimeAsync(1);
    await capped;
    expect(heldFor).toBe(1000);
  });

  it('with a share of the whole loop (1,000 ms a second or more), refuses nothing even when contended', async () => {
    const b = budgets(1000);
    await b.enter('other');
    for (let i = 0; i < 100; i++) expect(await refusalOf(b, 'k', 1 << 20)).toBeNull();
    expect(b.drainMs('k')).toBeGreaterThan(1000);
  });

  it("learns a key's cost per byte from its turns", async () => {
    const b = budgets(100);
    await b.enter('other');
    const first = await b.enter('k', 10_000);
    const second = await b.enter('k', 10_000);
    await first.beginTurn();
    // 10 ms for 10,000 bytes, where the default rate expected 0.15 ms.
    first.ms = 10;
    first.endTurn();
    const expected = 10_000 * (DEFAULT_MS_PER_BYTE + 0.25 * (10 / 10_000 - DEFAULT_MS_PER_BYTE));
    const third = await b.enter('k', 10_000);
    // The second waits with its estimate from admission, the third with the learnt rate.
    const second_ = 10_000 * DEFAULT_MS_PER_BYTE;
    expect(b.drainMs('k')).toBeCloseTo(90 + (second_ + expected) * 10, 6);
    b.charge('k', first);
    b.charge('k', second);
    b.charge('k', third);
    // Out of the backlog once each: only the pause is left.
    expect(b.drainMs('k')).toBeCloseTo(90, 6);
  });

  it('charges the quarantine rows a request writes, 0.05 ms each, beside its own CPU', () => {
    const meter = new CpuMeter();
    meter.chargeBody(128 * 1024);
    meter.chargeQuarantineRows(1000);
    expect(meter.ms).toBeCloseTo(1 + 50, 6);
  });

  it('a meter without a key has no turn to wait for', async () => {
    const meter = new CpuMeter();
    await expect(meter.beginTurn()).resolves.toBeUndefined();
    meter.endTurn();
  });
});
