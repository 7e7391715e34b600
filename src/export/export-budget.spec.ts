import { AppError } from '@app/common/app-error';
import { KeyTimeBudgets } from '@app/common/rate-limit/time-budget';
import { admitExport } from './export-budget';

const budgets = () => new KeyTimeBudgets(() => 1000);

describe('admitExport (an export against its key read budget)', () => {
  it('charges as it goes, and turns the key away with 429 once it is past its budget', () => {
    const slots = budgets();
    const admitted = admitExport(slots, 'k', 100);
    admitted.charge(600);
    expect(admitted.overdrawnMs()).toBeNull();
    admitted.charge(600);
    // 200 ms over at 100 ms per second: two seconds until the key has read time again.
    expect(admitted.overdrawnMs()).toBeGreaterThan(1_900);
    expect(slots.take('k', 10, 100).ok).toBe(false);
    let refused: unknown;
    try {
      admitExport(slots, 'k', 100);
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(AppError);
    expect(refused).toMatchObject({ code: 'rate_limited' });
    admitted.end();
    admitted.end();
  });

  it('is not bounded by the concurrent reads of its key', () => {
    const slots = budgets();
    expect(slots.take('k', 1, 100).ok).toBe(true);
    expect(() => admitExport(slots, 'k', 100).end()).not.toThrow();
  });
});
