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
    const first = b.admit('k');
    const second = b.admit('k');
    await first.beginTurn();
    const waiting = second.beginTurn().then(
      () => null,
      (err: unknown) => err,
    );
    first.ms = 50;
    first.endTurn();
    await jest.advanceTimersByTimeAsync(1_000);
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

  it('a meter without a key has no turn to wait for', async () => {
    const meter = new CpuMeter();
    await expect(meter.beginTurn()).resolves.toBeUndefined();
    meter.endTurn();
  });
});
