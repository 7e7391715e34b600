import { RE2JS } from 're2js';

/** What Ajv's `code.regExp` option must return. */
export interface LinearRegExp {
  test(input: string): boolean;
  toString(): string;
}

// Patterns that V8's own (backtracking) engine runs in linear time, and in the same way as RE2:
// anchored at the start, no groups, alternation, `.` or `\s`, and at most one quantifier that is
// not a fixed count. A backtracking engine then tries one start position and, for the single
// variable quantifier, each count once, with a fixed-length rest: O(input × pattern). Most plan
// patterns (`^[a-z0-9-]+$`, `^[A-Z]{4}$`, `^\d{3}-\d{4}$`) have this shape, and V8 matches them
// several times faster than re2js.
const LITERAL = String.raw`[A-Za-z0-9 _\-:/@,=#%&'"!~<>;]`;
const ESCAPE = String.raw`\\[.+*?()[\]{}|^$\\/dDwW]`;
const CLASS = String.raw`\[\^?(?:[^\]\\[]|\\[-\]\\^dDwW.[])+\]`;
const QUANTIFIER = String.raw`[*+?]|\{\d{1,4}(?:,\d{0,4})?\}`;
const TOKEN = new RegExp(`(${LITERAL}|${ESCAPE}|${CLASS})(${QUANTIFIER})?`, 'y');
const FIXED = /^\{\d+\}$/;

/** Whether `pattern` has the shape that V8 runs in linear time (see above). */
export function isLinearOnV8(pattern: string): boolean {
  if (!pattern.startsWith('^')) return false;
  const end = pattern.endsWith('$') && !pattern.endsWith('\\$') ? pattern.length - 1 : pattern.length;
  let variable = 0;
  TOKEN.lastIndex = 1;
  while (TOKEN.lastIndex < end) {
    const at = TOKEN.lastIndex;
    const m = TOKEN.exec(pattern);
    if (m === null || TOKEN.lastIndex > end) return false;
    if (m[2] !== undefined && !FIXED.test(m[2]) && ++variable > 1) return false;
    if (TOKEN.lastIndex === at) return false;
  }
  return true;
}

function compile(pattern: string, flags: string): LinearRegExp {
  // Compiled by RE2 in every case, so that a plan is refused for the same patterns either way.
  const re = RE2JS.compile(pattern);
  const name = `/${pattern}/${flags}`;
  if (isLinearOnV8(pattern)) {
    try {
      // The RegExp itself, not a wrapper: the validators call its `test` directly. Without the
      // `g` or `y` flag (Ajv passes `u` or none) it keeps no state between calls.
      return new RegExp(pattern, flags);
    } catch {
      // Not valid in V8's unicode mode (an identity escape it refuses): RE2 runs it.
    }
  }
  return { test: (input) => re.test(input), toString: () => name };
}

/**
 * A pattern on a linear-time engine, for Ajv's `code.regExp`: a pattern such as `^(a+)+$` costs
 * time linear in the input, never exponential. RE2's engine (re2js, pure JavaScript) runs every
 * pattern, except the simple shapes that V8's own engine provably runs in linear time. A pattern
 * RE2 does not support (backreferences, lookaround) throws, so the plan is refused at PUT.
 *
 * `toString` must name the pattern: Ajv caches compiled patterns by it. `code` names the engine
 * in Ajv's standalone code, whose runner supplies it under that name (plan-compiler.ts).
 */
export const linearRegExp = Object.assign(compile, { code: 'linearRegExp' });

/** A `linearRegExp` as Ajv's `code.regExp` takes it. */
export type LinearRegExpFactory = ((pattern: string, flags: string) => LinearRegExp) & { code: string };

/**
 * A `linearRegExp` that builds each pattern once: one per plan, shared by its validators and flat
 * forms, and freed with it. Ajv asks for a pattern's matcher every time the pattern appears, and
 * a compiled RE2 program takes tens of kilobytes.
 */
export function linearRegExps(): LinearRegExpFactory {
  const built = new Map<string, LinearRegExp>();
  const make = (pattern: string, flags: string): LinearRegExp => {
    const key = `${flags}/${pattern}`;
    let re = built.get(key);
    if (re === undefined) built.set(key, (re = compile(pattern, flags)));
    return re;
  };
  return Object.assign(make, { code: 'linearRegExp' });
}
