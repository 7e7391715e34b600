import { KeyTimeBudgets } from './time-budget';

describe('KeyTimeBudgets', () => {
  const budgets = () => new KeyTimeBudgets((msPerSecond) => msPerSecond);

  it('admits a key with credit, charges it at the end, and refuses it while in debt', () => {
    const b = budgets();
    expect(b.take('k', Infinity, 100, 0)).toEqual({ ok: true });
    b.give('k', 150, 100);
    // 100 ms of burst, 150 spent: 50 ms of debt, repaid at 100 ms per second.
    expect(b.take('k', Infinity, 100, 0)).toEqual({ ok: false, reason: 'time', retryAfterMs: 500 });
    expect(b.take('k', Infinity, 100, 400)).toEqual({ ok: false, reason: 'time', retryAfterMs: 100 });
    expect(b.take('k', Infinity, 100, 600)).toEqual({ ok: true });
  });

  it('keys are independent, credit never exceeds the burst, and concurrency is bounded', () => {
    const b = budgets();
    b.take('a', 1, 100, 0);
    b.give('a', 1000, 100);
    expect(b.take('b', 1, 100, 0)).toEqual({ ok: true });
    expect(b.take('b', 1, 100, 0)).toEqual({ ok: false, reason: 'concurrency' });
    b.give('b', 0, 100);
    // Idle for an hour: still only one burst of credit.
    expect(b.take('b', 1, 100, 3_600_000)).toEqual({ ok: true });
    b.give('b', 150, 100);
    expect(b.take('b', 1, 100, 3_600_000).ok).toBe(false);
  });
});
