import { utcDateString } from '@app/common/time';
import { addDays, daySpan, parseInstant, parseUtcDate } from './time-params';

describe('time parameters', () => {
  it('parseUtcDate accepts real days only', () => {
    expect(parseUtcDate('2026-11-21')).toBe(Date.UTC(2026, 10, 21));
    expect(parseUtcDate('2024-02-29')).toBe(Date.UTC(2024, 1, 29));
    for (const bad of [
      '2026-02-30',
      '2025-02-29',
      '2026-13-01',
      '2026-00-10',
      '2026-1-1',
      '0999-01-01',
      '',
    ]) {
      expect(parseUtcDate(bad)).toBeNull();
    }
  });

  it('parseInstant takes epoch ms and ISO-8601 with an offset', () => {
    expect(parseInstant('1763780000123')).toBe(1_763_780_000_123);
    expect(parseInstant('0')).toBe(0);
    expect(parseInstant('2026-11-21')).toBe(Date.UTC(2026, 10, 21));
    expect(parseInstant('2026-11-21T10:20:30Z')).toBe(Date.UTC(2026, 10, 21, 10, 20, 30));
    expect(parseInstant('2026-11-21T10:20:30.1234Z')).toBe(Date.UTC(2026, 10, 21, 10, 20, 30, 123));
    expect(parseInstant('2026-11-21T12:20:30+02:00')).toBe(Date.UTC(2026, 10, 21, 10, 20, 30));
    expect(parseInstant('2026-11-21T05:20-0500')).toBe(Date.UTC(2026, 10, 21, 10, 20));
    for (const bad of [
      '2026-11-21T10:20:30',
      '2026-02-30T00:00:00Z',
      '2026-11-21T24:00:00Z',
      '2026-11-21T10:60Z',
      '-1',
      '1.5',
      '1e12',
      '9999999999999999',
      'now',
    ]) {
      expect(parseInstant(bad)).toBeNull();
    }
  });

  it('day arithmetic', () => {
    expect(utcDateString(Date.UTC(2026, 10, 21, 23, 59, 59, 999))).toBe('2026-11-21');
    expect(addDays('2026-03-01', -1)).toBe('2026-02-28');
    expect(addDays('2026-12-31', 1)).toBe('2027-01-01');
    expect(daySpan('2026-11-21', '2026-11-21')).toBe(1);
    expect(daySpan('2025-01-01', '2026-01-01')).toBe(366);
  });
});
