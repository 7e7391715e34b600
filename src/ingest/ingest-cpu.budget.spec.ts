import type { AppConfig } from '@app/config/config';
import { AppError } from '@app/common/app-error';
import { CpuMeter, IngestCpuBudgets } from './ingest-cpu.budget';

const budgets = (ms: number) => new IngestCpuBudgets({ ingestCpuMsPerSecond: ms } as AppConfig);

describe('IngestCpuBudgets turns', () => {
  // Jest's fake clock drives the pause's timer and performance.now alike.
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('charges a turn when it ends, so a request that waited is refused at its turn once the share is spent', async () => {
    const b = budgets(10);
    // Another app's request on the instance: k is contended, and its share binds.
    b.admit('other');
    const first = b.admit('k');
    const second = b.admit('k');
    await first.beginTurn();
    const waiting = second.beginTurn().then(
      () => null,
      (err: unknown) => err,
    );
    first.ms = 50;
    first.endTurn();
    await jest.advanceTimersByTimeAsync(999);
    // The other app is still active when k's pause ends.
    b.admit('other');
    await jest.advanceTimersByTimeAsync(1);
    const refusal = await waiting;
    expect(refusal).toBeInstanceOf(AppError);
    expect(refusal).toEqual(expect.objectContaining({ code: 'rate_limited' }));
    // 40 ms of debt at 10 ms per second, less the 1 s pause after the first turn (its cost at a
    // share of 1 %, capped): 3 s. Refused after its body was read: the connection stays open.
    expect((refusal as AppError).options.headers).toEqual({ 'Retry-After': '3' });
    b.charge('k', first);
    b.charge('k', second);
    // The first request's cost is charged once: 50 ms, 40 over the 10 ms burst.
    expect(b.overdrawn('k', 10)).toBe(3_000);
  });

  it('a key alone is neither paused nor refused, however much it spends; a second key makes it bind', async () => {
    const b = budgets(10);
    const first = b.admit('k');
    const second = b.admit('k');
    await first.beginTurn();
    const turn = second.beginTurn();
    first.ms = 500;
    first.endTurn();
    // Its next turn comes on the next turn of the event loop, with no pause and no 429.
    await jest.advanceTimersByTimeAsync(0);
    await expect(turn).resolves.toBeUndefined();
    second.ms = 500;
    b.charge('k', first);
    b.charge('k', second);
    expect(() => b.admit('k').endTurn()).not.toThrow();
    // Another app arrives: k's spending counts again from a full burst, and it is soon refused.
    b.admit('other');
    const third = b.admit('k');
    await third.beginTurn();
    third.ms = 50;
    third.endTurn();
    b.charge('k', third);
    expect(() => b.admit('k')).toThrow(expect.objectContaining({ code: 'rate_limited' }));
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
