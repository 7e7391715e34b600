import { AppError } from '@app/common/app-error';
import { bucketsOf } from './insights.service';
import { resolveRange } from '@app/common/reads/day-range';

describe('bucketsOf', () => {
  it('clips ISO weeks (Monday first) and months to the range', () => {
    expect(bucketsOf('2026-10-28', '2026-11-10', 'week', 1)).toEqual([
      { start: '2026-10-28', end: '2026-11-01' },
      { start: '2026-11-02', end: '2026-11-08' },
      { start: '2026-11-09', end: '2026-11-10' },
    ]);
    expect(bucketsOf('2026-01-15', '2026-03-02', 'month', 1)).toEqual([
      { start: '2026-01-15', end: '2026-01-31' },
      { start: '2026-02-01', end: '2026-02-28' },
      { start: '2026-03-01', end: '2026-03-02' },
    ]);
    expect(bucketsOf('2024-02-01', '2024-02-29', 'month', 1)).toEqual([
      { start: '2024-02-01', end: '2024-02-29' },
    ]);
  });

  it('gives one bucket per day, each the window of days ending that day', () => {
    expect(bucketsOf('2026-11-01', '2026-11-03', 'day', 7)).toEqual([
      { start: '2026-10-26', end: '2026-11-01' },
      { start: '2026-10-27', end: '2026-11-02' },
      { start: '2026-10-28', end: '2026-11-03' },
    ]);
    expect(bucketsOf('2026-11-01', '2026-11-30', 'total', 1)).toEqual([
      { start: '2026-11-01', end: '2026-11-30' },
    ]);
  });
});

describe('resolveRange', () => {
  const today = '2026-11-27';
  it('follows the rules of rollups: range, dates, the 30-day default', () => {
    expect(resolveRange({}, today)).toEqual({ fromDate: '2026-10-29', toDate: today });
    expect(resolveRange({ range: '7d' }, today)).toEqual({ fromDate: '2026-11-21', toDate: today });
    expect(resolveRange({ fromDate: '2026-11-01', toDate: '2026-11-02' }, today)).toEqual({
      fromDate: '2026-11-01',
      toDate: '2026-11-02',
    });
  });

  it.each([
    [{ range: '7d', toDate: today }, 'conflict'],
    [{ range: '367d' }, 'out_of_range'],
    [{ fromDate: '2026-11-28' }, 'invalid_range'],
    [{ fromDate: '2024-01-01', toDate: '2026-01-01' }, 'span_too_long'],
  ])('refuses %j with %s', (query, code) => {
    let error: unknown;
    try {
      resolveRange(query, today);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe('invalid_query');
    expect(JSON.stringify((error as AppError).options?.errors)).toContain(code);
  });
});
