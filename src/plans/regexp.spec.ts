import { isLinearOnV8, linearRegExp } from './regexp';

describe('linear-time patterns', () => {
  it.each([
    '^[a-z0-9-]+$',
    '^[A-Z]{4}$',
    '^\\d{3}-\\d{4}$',
    '^[A-Z0-9]{4,12}$',
    '^v\\d+$',
    '^pro$',
    '^[^/]*$',
  ])('%s runs on V8 (one variable quantifier, anchored)', (p) => expect(isLinearOnV8(p)).toBe(true));

  it.each(['^(a+)+$', '^a*a*$', '[a-z]+', '^\\d+\\.\\d+$', '^(pro|free)$', '^.*$', '^\\s+$', '^a+$\\$'])(
    '%s runs on RE2',
    (p) => expect(isLinearOnV8(p)).toBe(false),
  );

  it('both engines give the same answers', () => {
    for (const [pattern, input, expected] of [
      ['^[a-z0-9-]+$', 'id-12', true],
      ['^[a-z0-9-]+$', 'Id-12', false],
      ['^[A-Z]{4}$', 'ABCD', true],
      ['^[A-Z]{4}$', 'ABCDE', false],
      ['^(a+)+$', 'aaa', true],
      ['b', 'abc', true],
    ] as const) {
      expect(linearRegExp(pattern, 'u').test(input)).toBe(expected);
    }
  });

  it('answers ^(a+)+$ on a 1,000-character value without backtracking', () => {
    const re = linearRegExp('^(a+)+$', 'u');
    const value = 'a'.repeat(999) + '!';
    const started = process.hrtime.bigint();
    expect(re.test(value)).toBe(false);
    // V8's backtracking engine would take longer than the age of the universe here.
    expect(Number(process.hrtime.bigint() - started) / 1e6).toBeLessThan(50);
  });

  it('refuses what RE2 cannot run', () => {
    expect(() => linearRegExp('(a)\\1', 'u')).toThrow();
    expect(() => linearRegExp('(?=a)', 'u')).toThrow();
  });
});
