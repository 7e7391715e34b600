import { csvCell, neutraliseCell, rollupsCsv } from '../web/src/csv';
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
});
