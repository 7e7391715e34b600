import { RE2JS } from 're2js';

/** What Ajv's `code.regExp` option must return. */
export interface LinearRegExp {
  test(input: string): boolean;
  toString(): string;
}

/**
 * A pattern on RE2's linear-time engine (re2js, pure JavaScript), for Ajv's `code.regExp`: a
 * pattern such as `^(a+)+$` costs time linear in the input, never exponential. A pattern RE2
 * does not support (backreferences, lookaround) throws, so the plan is refused at PUT.
 *
 * `toString` must name the pattern: Ajv caches compiled patterns by it.
 */
function compile(pattern: string, flags: string): LinearRegExp {
  const re = RE2JS.compile(pattern);
  const name = `/${pattern}/${flags}`;
  return { test: (input) => re.test(input), toString: () => name };
}

// `code` names the engine in standalone code, which Tally never generates.
export const linearRegExp = Object.assign(compile, { code: 'linearRegExp' });
