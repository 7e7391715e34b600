import fc from 'fast-check';
import { compilePlan } from './plan-compiler';
import { codePoints, flatCheck } from './flat-check';
import { linearRegExp } from './regexp';

const NAMES = ['a', 'b', 'plan', 'n'];
const STRINGS = ['', 'a', 'b', 'pro', 'id-1', 'ID', 'AB', 'é', '😀', '😀😀a', 'aaaa', '12', 'a b'];
const PATTERNS = ['^[a-z0-9-]+$', '^[A-Z]{2}$', 'b', '^(a+)+$', '^\\d+$', '^.{1,3}$'];

const numbers = fc.oneof(fc.integer({ min: -1, max: 3 }), fc.constantFrom(0.5, 2.5));
const primitive = fc.oneof(fc.constantFrom(...STRINGS), numbers, fc.boolean());
const count = fc.integer({ min: 0, max: 4 });
const optional = { requiredKeys: [] as never[] };

/** A type and at most two of its keywords: more rules than that rarely let a payload through. */
function typed(type: fc.Arbitrary<unknown>, keywords: Record<string, fc.Arbitrary<unknown>>) {
  return fc
    .tuple(
      type,
      fc
        .subarray(Object.keys(keywords), { maxLength: 2 })
        .chain((names) => fc.record(Object.fromEntries(names.map((n) => [n, keywords[n]])))),
    )
    .map(([t, rest]) => ({ type: t, ...rest }));
}

// One arbitrary per type, with only the keywords strict mode allows on it.
const stringSchema = typed(fc.constant('string'), {
  minLength: count,
  maxLength: count,
  pattern: fc.constantFrom(...PATTERNS),
  enum: fc.uniqueArray(fc.constantFrom(...STRINGS), { minLength: 1, maxLength: 4 }),
  description: fc.constant('a note'),
});
const numberSchema = typed(fc.constantFrom('integer', 'number', ['integer', 'number']), {
  minimum: numbers,
  maximum: numbers,
  exclusiveMinimum: numbers,
  exclusiveMaximum: numbers,
  enum: fc.uniqueArray(numbers, { minLength: 1, maxLength: 3 }),
});
const otherSchema = fc.oneof(
  fc.record({ type: fc.constantFrom('boolean', ['boolean', 'string'], ['string', 'integer']) }),
  fc.record({ enum: fc.uniqueArray(primitive, { minLength: 1, maxLength: 4 }) }),
  fc.record({ const: primitive }),
  fc.record({ description: fc.constant('anything') }, optional),
  fc.constant(true),
);
const propertySchema = fc.oneof(stringSchema, numberSchema, otherSchema);

const payloadSchema = fc.record(
  {
    type: fc.constant('object'),
    properties: fc.dictionary(fc.constantFrom(...NAMES), propertySchema, { maxKeys: 3 }),
    required: fc.uniqueArray(fc.constantFrom(...NAMES, 'other'), { maxLength: 2 }),
    additionalProperties: fc.boolean(),
  },
  optional,
);

/** Payloads for `schema`: values near its own limits and enums come up often, so that off-by-one rules show. */
function payloadsFor(schema: Record<string, unknown>) {
  const near: unknown[] = [];
  for (const rules of Object.values((schema.properties ?? {}) as Record<string, unknown>)) {
    if (typeof rules !== 'object' || rules === null) continue;
    for (const [keyword, value] of Object.entries(rules)) {
      if (keyword === 'enum') near.push(...(value as unknown[]));
      else if (keyword === 'const') near.push(value);
      else if (typeof value === 'number') {
        near.push(value, value + 1, value - 1, value + 0.5);
        if (!Number.isInteger(value) || value < 0) continue;
        // Strings a code point or a UTF-16 unit around a length limit.
        near.push(
          'x'.repeat(value),
          'x'.repeat(value + 1),
          '😀'.repeat(value),
          '😀'.repeat(Math.max(0, value - 1)),
          '😀'.repeat(Math.max(0, value - 1)) + 'x',
        );
      }
    }
  }
  const value = near.length ? fc.oneof(primitive, fc.constantFrom(...near)) : primitive;
  const names = fc.constantFrom(...NAMES, 'other', 'extra');
  return fc.array(fc.dictionary(names, value, { maxKeys: 5 }), { minLength: 20, maxLength: 40 });
}

/** One definition compiled as ingest compiles it, or null when the plan refuses the schema. */
function compiled(schema: unknown) {
  const result = compilePlan({ mode: 'enforce', events: { E: { payload: schema } } }, 1);
  return result.ok ? result.compiled.definition('E')! : null;
}

describe('flatCheck', () => {
  it('gives the same verdict as Ajv for every flat schema and payload', () => {
    let checked = 0;
    let passed = 0;
    fc.assert(
      fc.property(
        payloadSchema.chain((schema) => fc.tuple(fc.constant(schema), payloadsFor(schema))),
        ([schema, payloads]) => {
          const def = compiled(schema);
          // Strict mode refuses some combinations (a bound on a string property, say): no plan.
          fc.pre(def !== null);
          expect(def!.quick).not.toBeNull();
          for (const p of payloads) {
            expect([schema, p, def!.quick!(p)]).toEqual([schema, p, def!.validate!(p)]);
            checked++;
            if (def!.quick!(p)) passed++;
          }
        },
      ),
      // Each run compiles a plan (tens of ms): fewer schemas, more payloads each.
      { numRuns: 200 },
    );
    // Both verdicts came up often enough to mean something.
    expect(checked).toBeGreaterThan(2000);
    expect(passed / checked).toBeGreaterThan(0.05);
    expect(passed / checked).toBeLessThan(0.95);
  });

  it('counts lengths in code points at the edges, as Ajv does', () => {
    const cases: [Record<string, unknown>, string, boolean][] = [
      [{ minLength: 2 }, '😀', false],
      [{ minLength: 2 }, '😀x', true],
      [{ minLength: 2 }, 'xx', true],
      [{ maxLength: 1 }, '😀', true],
      [{ maxLength: 1 }, '😀😀', false],
      [{ maxLength: 2 }, 'x😀', true],
    ];
    for (const [rule, value, expected] of cases) {
      const def = compiled({ type: 'object', properties: { a: { type: 'string', ...rule } } })!;
      expect([rule, value, def.quick!({ a: value })]).toEqual([rule, value, expected]);
      expect(def.validate!({ a: value })).toBe(expected);
    }
  });

  it('counts code points as JSON Schema does', () => {
    expect(codePoints('abc')).toBe(3);
    expect(codePoints('😀')).toBe(1);
    expect(codePoints('a😀b')).toBe(3);
    // A lone surrogate counts as one.
    expect(codePoints('\uD83Da')).toBe(2);
  });

  it('leaves schemas outside the flat form to Ajv', () => {
    for (const schema of [
      { type: 'object', properties: { a: { type: 'object' } } },
      { type: 'object', properties: { a: { type: 'array' } } },
      { type: 'object', properties: { a: { type: 'integer', multipleOf: 2 } } },
      { type: 'object', properties: { a: { enum: [{ x: 1 }] } } },
      { type: 'object', patternProperties: { '^a': { type: 'string' } } },
      { type: 'object', additionalProperties: { type: 'string' } },
      { type: 'object', minProperties: 1 },
      { type: 'object', properties: { a: { anyOf: [{ type: 'string' }] } } },
      { type: 'object', properties: { a: false } },
      // Names a plain object answers through its prototype.
      { type: 'object', properties: { constructor: { type: 'string' } } },
      { type: 'object', required: ['toString'] },
      // A required name that a closed schema does not list.
      { type: 'object', required: ['a'], additionalProperties: false },
      false,
    ]) {
      expect([schema, flatCheck(schema, linearRegExp)]).toEqual([schema, null]);
    }
  });

  it('takes `true` and an open object as they are', () => {
    expect(flatCheck(true, linearRegExp)!({ any: 1 })).toBe(true);
    const open = flatCheck({ type: 'object', properties: { a: { type: 'string' } } }, linearRegExp)!;
    expect(open({ b: 1 })).toBe(true);
    expect(open({ a: 1 })).toBe(false);
  });

  it('runs patterns on the linear-time engine', () => {
    const check = flatCheck(
      { type: 'object', properties: { a: { type: 'string', pattern: '^(a+)+$' } } },
      linearRegExp,
    )!;
    const started = process.hrtime.bigint();
    expect(check({ a: 'a'.repeat(999) + '!' })).toBe(false);
    expect(Number(process.hrtime.bigint() - started) / 1e6).toBeLessThan(50);
  });
});
