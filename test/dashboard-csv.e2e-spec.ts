import { csvCell, neutraliseCell, rollupsCsv } from '../web/src/csv';
import { formatNumber, plainNumber } from '../web/src/format';
import type { Rollup } from '../web/src/api';

// The dashboard's CSV download, checked without a browser: OWASP's CSV-injection rules.
describe('dashboard CSV cells', () => {
  it.each([
    ['=1+1'],
    ['+1'],
    ['-1'],
    ['@SUM(A1)'],
    [';=1'],
    ['|calc'],
    ['%0A=1'],
    [' =1'],
    ['   @x'],
    ['\u00a0=HYPERLINK("http://x")'],
    ['\u2003=1'],
    ['\ufeff=1'],
    ['\t=1'],
    ['\r=1'],
    ['\n=1'],
    ['\tplain'],
    ['＝1+1'],
    ['＋1'],
    ['－1'],
    ['＠x'],
    ['；=1'],
    [' ＝1'],
  ])('neutralises %j with a leading quote', (text) => {
    expect(neutraliseCell(text)).toBe(`'${text}`);
  });

  it.each([['Checkout.completed'], ['a=b'], ['x-1'], ['中文'], [''], ['1+1'], ["'=already"]])(
    'leaves %j alone',
    (text) => {
      expect(neutraliseCell(text)).toBe(text);
    },
  );

  it('quotes a neutralised cell, escapes its quotes, and writes numbers as they are', () => {
    expect(csvCell('=HYPERLINK("http://x","y")')).toBe(`"'=HYPERLINK(""http://x"",""y"")"`);
    expect(csvCell(' =1')).toBe(`"' =1"`);
    expect(csvCell(-5)).toBe('-5');
    expect(csvCell(null)).toBe('');
    expect(csvCell(true)).toBe('true');
    expect(csvCell('a,b')).toBe('"a,b"');
    expect(csvCell('plain')).toBe('plain');
  });

  it('an event name that is a formula reaches the file neutralised', () => {
    const row = {
      appId: 'a',
      date: '2026-11-24',
      eventName: '\u00a0=cmd|" /C calc"!A0',
      isTestMode: false,
      events: 1,
      uniqueUsers: 1,
      uniqueSessions: 1,
      floatValue: null,
      final: true,
      computedAt: 0,
    } as unknown as Rollup;
    const [, line] = rollupsCsv([row]).split('\r\n');
    expect(line).toBe(`2026-11-24,"'\u00a0=cmd|"" /C calc""!A0",false,1,1,1,,,,,,true`);
  });

  it('writes floatValue stats without binary floating-point noise, and shows them in cents', () => {
    const avg = 299.95 / 5;
    expect(String(avg)).toBe('59.989999999999995');
    const row = {
      appId: 'a',
      date: '2026-11-24',
      eventName: 'Checkout.completed',
      isTestMode: false,
      events: 5,
      uniqueUsers: 5,
      uniqueSessions: 5,
      floatValue: { count: 5, sum: 0.1 + 0.2, min: 59.99, max: 1e21, avg },
      final: true,
      computedAt: 0,
    } as unknown as Rollup;
    const [, line] = rollupsCsv([row]).split('\r\n');
    expect(line).toBe('2026-11-24,Checkout.completed,false,5,5,5,5,0.3,59.99,1e+21,59.99,true');
    expect(plainNumber(-2.675)).toBe(-2.675);
    expect(plainNumber(7)).toBe(7);
    expect([avg, 0.1 + 0.2, 1234567.891, 12, -3.5, null, undefined, NaN].map(formatNumber)).toEqual([
      '59.99',
      '0.30',
      '1,234,567.89',
      '12',
      '-3.50',
      '–',
      '–',
      '–',
    ]);
  });
});
