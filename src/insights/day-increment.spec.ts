import { type BreakdownKey, canAddToDay } from './day-increment';

const row = (dimension: string, kind: number, value: string, m = false): BreakdownKey => ({
  dimension,
  m,
  kind,
  value,
});

describe('canAddToDay', () => {
  const stored = [
    row('platform', 0, 'iOS'),
    row('platform', 0, 'Android'),
    row('platform', 2, ''),
    row('appVersion', 0, '1.0'),
    row('appVersion', 1, ''),
    row('eventName', 0, 'Shop.viewed'),
  ];

  it('takes values the day keeps rows of, in either mode', () => {
    expect(canAddToDay(stored, [row('platform', 0, 'iOS', true), row('appVersion', 1, '')], [], 2)).toBe(
      true,
    );
  });

  it('refuses a value of a dimension that folds values into other, unless kept', () => {
    expect(canAddToDay(stored, [row('platform', 0, 'web')], [], 2)).toBe(false);
    expect(canAddToDay(stored, [row('platform', 1, '')], [], 2)).toBe(false);
  });

  it('takes new values of a dimension without other up to the bound, counting both modes once', () => {
    expect(canAddToDay(stored, [row('appVersion', 0, '2.0'), row('appVersion', 0, '2.0', true)], [], 3)).toBe(
      true,
    );
    expect(canAddToDay(stored, [row('appVersion', 0, '2.0'), row('appVersion', 0, '3.0')], [], 3)).toBe(
      false,
    );
    expect(canAddToDay([], [row('locale', 0, 'de'), row('locale', 1, '')], [], 2)).toBe(true);
  });

  it('refuses an added name that stored events had, or that other may hold', () => {
    expect(canAddToDay(stored, [], ['Cart.added'], 5)).toBe(true);
    expect(canAddToDay(stored, [], ['Shop.viewed'], 5)).toBe(false);
    expect(canAddToDay([...stored, row('eventName', 2, '')], [], ['Cart.added'], 5)).toBe(false);
  });

  it('refuses a row of kind other among the new ones', () => {
    expect(canAddToDay([], [row('platform', 2, '')], [], 2)).toBe(false);
  });
});
