import {
  canonicalTimeZone,
  isTimeZone,
  localDateString,
  localDatesOverlapping,
  localDayBounds,
  LocalDayNamer,
} from './timezones';

const HOUR = 3_600_000;

describe('time zones', () => {
  it('accepts IANA names and refuses offsets, rules and unknown names', () => {
    for (const ok of [
      'UTC',
      'Europe/Berlin',
      'America/Argentina/Buenos_Aires',
      'Etc/GMT+5',
      'Asia/Kolkata',
    ]) {
      expect(isTimeZone(ok)).toBe(true);
    }
    for (const bad of ['+05:00', 'EST5EDT,M3.2.0,M11.1.0', 'Mars/Olympus_Mons', '', 'x'.repeat(65), 42]) {
      expect(isTimeZone(bad)).toBe(false);
    }
  });

  it('spells listed names the usual way and keeps aliases', () => {
    expect(canonicalTimeZone('europe/berlin')).toBe('Europe/Berlin');
    expect(canonicalTimeZone('utc')).toBe('UTC');
    expect(canonicalTimeZone('Asia/Kolkata')).toBe('Asia/Kolkata');
  });

  it('knows the 25- and 23-hour days of New York', () => {
    const fall = localDayBounds('2026-11-01', 'America/New_York');
    expect(new Date(fall.start).toISOString()).toBe('2026-11-01T04:00:00.000Z');
    expect(fall.end - fall.start).toBe(25 * HOUR);
    const spring = localDayBounds('2026-03-08', 'America/New_York');
    expect(new Date(spring.start).toISOString()).toBe('2026-03-08T05:00:00.000Z');
    expect(spring.end - spring.start).toBe(23 * HOUR);
  });

  it('starts a day whose midnight is skipped at the transition', () => {
    // Santiago moves from 00:00 to 01:00 on 6 September 2026.
    const { start } = localDayBounds('2026-09-06', 'America/Santiago');
    expect(localDateString(start, 'America/Santiago')).toBe('2026-09-06');
    expect(localDateString(start - 1, 'America/Santiago')).toBe('2026-09-05');
  });

  it('lists the local days that overlap a day of another zone', () => {
    const utc = localDayBounds('2026-11-20', 'UTC');
    expect(localDatesOverlapping(utc.start, utc.end, 'Asia/Tokyo')).toEqual(['2026-11-20', '2026-11-21']);
    expect(localDatesOverlapping(utc.start, utc.end, 'UTC')).toEqual(['2026-11-20']);
  });

  it('names days like Intl across a day boundary, from its remembered bounds or not', () => {
    const namer = new LocalDayNamer('Pacific/Chatham');
    const start = Date.parse('2026-11-19T10:15:00Z');
    for (const t of [start - 1, start, start + 1, start - 1, start + 25 * HOUR]) {
      expect(namer.dateOf(t)).toBe(localDateString(t, 'Pacific/Chatham'));
    }
  });
});
