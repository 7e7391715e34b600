import fc from 'fast-check';
import { jsonByteLength, jsonStringBytes } from './json-size';

const utf8 = (v: unknown) => Buffer.byteLength(JSON.stringify(v), 'utf8');

describe('jsonByteLength', () => {
  it('equals the UTF-8 size of JSON.stringify for any JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(jsonByteLength(v)).toBe(utf8(v));
      }),
      { numRuns: 2000 },
    );
  });

  it.each(['', 'a"b\\c', '\u0000\u0008\u001f\u007f', 'é€😀', '\ud800', 'x\udc00', '\u2028'])(
    'counts the escaped string %j exactly',
    (s) => expect(jsonStringBytes(s)).toBe(utf8(s)),
  );

  it('measures nesting far deeper than the call stack allows', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = { a: deep };
    expect(() => JSON.stringify(deep)).toThrow(RangeError);
    expect(jsonByteLength(deep)).toBe(100_000 * 6 + 1);
  });

  it('stops once past the limit', () => {
    const big = { list: Array.from({ length: 10_000 }, () => 'x'.repeat(100)) };
    const n = jsonByteLength(big, 1000);
    expect(n).toBeGreaterThan(1000);
    expect(n).toBeLessThan(utf8(big));
  });
});
