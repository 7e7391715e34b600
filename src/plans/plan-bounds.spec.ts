import {
  MAX_PATTERN_LENGTH,
  MAX_PLAN_VALUES,
  MAX_PLAN_EVENTS,
  MAX_PLAN_NODES,
  MAX_SCHEMA_DEPTH,
  planBoundProblems,
} from './plan-bounds';

function plan(payload: unknown, name = 'E'): unknown {
  return { mode: 'enforce', events: { [name]: { payload } } };
}

/** A payload schema nested `levels` levels deep (the schema itself is level 1). */
function nested(levels: number): unknown {
  let schema: unknown = { type: 'string' };
  for (let i = 1; i < levels; i++) schema = { type: 'object', properties: { a: schema } };
  return schema;
}

describe('planBoundProblems', () => {
  it('passes an ordinary plan', () => {
    const payload = {
      type: 'object',
      $defs: { plan: { type: 'string', enum: ['free', 'pro'] } },
      properties: { plan: { $ref: '#/$defs/plan' }, code: { type: 'string', pattern: '^[A-Z]{4}$' } },
    };
    expect(planBoundProblems(plan(payload))).toEqual([]);
  });

  it('refuses more event definitions than the bound', () => {
    const events: Record<string, unknown> = {};
    for (let i = 0; i <= MAX_PLAN_EVENTS; i++) events[`E${i}`] = {};
    expect(planBoundProblems({ mode: 'off', events })).toEqual([
      { path: 'events', message: 'A plan may hold at most 2,000 event definitions.' },
    ]);
    delete events.E0;
    expect(planBoundProblems({ mode: 'off', events })).toEqual([]);
  });

  it('counts every schema node of the plan', () => {
    const big = { type: 'string', enum: Array.from({ length: MAX_PLAN_NODES }, (_, i) => `v${i}`) };
    expect(planBoundProblems(plan(big))).toEqual([
      { path: 'events', message: 'A plan may hold at most 50,000 schema nodes.' },
    ]);
  });

  it('stops at 100,000 JSON values in all, wherever they are', () => {
    const junk = Array.from({ length: 2 * MAX_PLAN_VALUES }, () => 0);
    expect(planBoundProblems({ mode: 'off', events: {}, extra: junk })).toEqual([
      { path: '', message: 'A plan may hold at most 100,000 JSON values in all.' },
    ]);
  });

  it('bounds pattern lengths, in `pattern` and in `patternProperties`', () => {
    const long = '^' + 'a'.repeat(MAX_PATTERN_LENGTH) + '$';
    expect(planBoundProblems(plan({ type: 'string', pattern: long }))).toEqual([
      { path: 'events.E.payload.pattern', message: 'A pattern may be at most 1,000 characters.' },
    ]);
    expect(planBoundProblems(plan({ patternProperties: { [long]: true } }))).toEqual([
      {
        path: `events.E.payload.patternProperties.${long}`,
        message: 'A pattern may be at most 1,000 characters.',
      },
    ]);
    // A property named `pattern` is not a pattern, nor is a value in `enum`.
    expect(planBoundProblems(plan({ properties: { pattern: { const: long } } }))).toEqual([]);
  });

  it('bounds the nesting of a schema, without recursion however deep the body is', () => {
    expect(planBoundProblems(plan(nested(MAX_SCHEMA_DEPTH / 2)))).toEqual([]);
    const deep = planBoundProblems(plan(nested(MAX_SCHEMA_DEPTH)));
    expect(deep).toEqual([
      {
        path: expect.stringMatching(/^events\.E\.payload\./),
        message: 'A schema may nest at most 32 levels.',
      },
    ]);
    let body: unknown = {};
    for (let i = 0; i < 100_000; i++) body = { a: body };
    expect(planBoundProblems(plan(body))).toHaveLength(1);
    expect(planBoundProblems({ mode: 'off', events: {}, extra: body })[0].message).toBe(
      'A schema may nest at most 32 levels.',
    );
  });

  it('refuses a $ref outside the payload schema own $defs', () => {
    for (const ref of ['http://example.com/s.json', '#/properties/a', '#/$defs/missing', 'other#/$defs/a']) {
      expect(planBoundProblems(plan({ $defs: { a: true }, $ref: ref }))).toEqual([
        {
          path: 'events.E.payload.$ref',
          message: 'A $ref must point into the payload schema\'s own $defs ("#/$defs/<name>").',
        },
      ]);
    }
    expect(planBoundProblems(plan({ $id: 'x', type: 'object' }))[0].path).toBe('events.E.payload.$id');
    expect(planBoundProblems(plan({ $dynamicRef: '#a' }))).toHaveLength(1);
  });

  it('refuses recursive references: "#" and cycles through $defs', () => {
    expect(planBoundProblems(plan({ $ref: '#' }))).toEqual([
      { path: 'events.E.payload.$ref', message: 'A $ref may not be recursive: "#" is the schema itself.' },
    ]);
    const cycle = {
      $defs: { a: { properties: { b: { $ref: '#/$defs/b' } } }, b: { items: { $ref: '#/$defs/a' } } },
      $ref: '#/$defs/a',
    };
    expect(planBoundProblems(plan(cycle))).toEqual([
      {
        path: expect.stringMatching(/^events\.E\.payload\.\$defs\.[ab]$/),
        message: expect.stringMatching(/may not be recursive/),
      },
    ]);
    const self = { $defs: { a: { anyOf: [{ type: 'string' }, { $ref: '#/$defs/a' }] } } };
    expect(planBoundProblems(plan(self))).toHaveLength(1);
    // A chain is not a cycle, and `$ref` as data is no reference.
    const chain = { $defs: { a: { $ref: '#/$defs/b' }, b: { const: { $ref: '#' } } }, $ref: '#/$defs/a' };
    expect(planBoundProblems(plan(chain))).toEqual([]);
  });

  it('refuses NUL in any string, and control characters in keys', () => {
    expect(planBoundProblems({ mode: 'off', events: { E: { description: 'a\u0000b' } } })).toEqual([
      { path: 'events.E.description', message: 'Strings in a plan must not contain NUL (U+0000).' },
    ]);
    expect(planBoundProblems(plan({ type: 'string', pattern: '^a\u0000$' }))[0].path).toBe(
      'events.E.payload.pattern',
    );
    expect(planBoundProblems(plan({ properties: { 'a\u0000': true } }))).toEqual([
      {
        path: 'events.E.payload.properties.a\u0000',
        message: 'Keys in a plan must not contain control characters.',
      },
    ]);
    expect(planBoundProblems(plan({ properties: { 'a\nb': true } }))).toHaveLength(1);
    expect(planBoundProblems(plan({ enum: ['\ud800'] }))[0].message).toMatch(/lone surrogate/);
  });
});
