import type { ValidateFunction } from 'ajv';
import { CompiledPlan, type CompiledDefinition } from './compiled-plan';

function planWith(validate: ValidateFunction, quick: CompiledDefinition['quick'] = null): CompiledPlan {
  const definitions = new Map<string, CompiledDefinition>([
    ['E', { index: 0, floatValue: 'required', validate, quick }],
  ]);
  return new CompiledPlan(3, 'enforce', 'reject', definitions);
}

describe('CompiledPlan', () => {
  it('a validator that throws judges nothing, and is reported once per event name', () => {
    const throwing = (() => {
      throw new RangeError('Maximum call stack size exceeded');
    }) as unknown as ValidateFunction;
    const plan = planWith(throwing);
    const failures: string[] = [];
    plan.onFailure = (name, err) => failures.push(`${name}: ${(err as Error).message}`);
    const event = { eventName: 'E', floatValue: 1, payload: { a: 'x' } };
    expect(plan.check(event)).toBeNull();
    // The rules outside the schema still apply.
    expect(plan.check({ ...event, floatValue: null })).toEqual([
      { field: 'floatValue', code: 'schema_violation', message: 'floatValue is required (floatValue).' },
    ]);
    expect(failures).toEqual(['E: Maximum call stack size exceeded']);
  });

  it('a flat check that throws is caught the same way', () => {
    const quick = () => {
      throw new Error('broken');
    };
    const plan = planWith((() => true) as unknown as ValidateFunction, quick);
    expect(plan.check({ eventName: 'E', floatValue: 1, payload: null })).toBeNull();
  });

  it('makes a deferred definition runnable on its first use only, once, and never one no event uses', () => {
    const made: string[] = [];
    const deferred = (name: string, index: number) => ({
      index,
      make: (): CompiledDefinition => {
        made.push(name);
        return { index, floatValue: 'forbidden', validate: null, quick: null };
      },
    });
    const plan = new CompiledPlan(
      1,
      'enforce',
      'reject',
      new Map([
        ['A', deferred('A', 0)],
        ['B', deferred('B', 1)],
      ]),
    );
    expect(plan.names).toEqual(['A', 'B']);
    expect(made).toEqual([]);
    const event = { eventName: 'A', floatValue: 2, payload: null };
    const forbidden = [
      { field: 'floatValue', code: 'schema_violation', message: 'floatValue is forbidden (floatValue).' },
    ];
    expect(plan.check(event)).toEqual(forbidden);
    expect(plan.check(event)).toEqual(forbidden);
    expect(made).toEqual(['A']);
  });

  it('a deferred definition that cannot be made judges nothing, and is reported once', () => {
    const failures: string[] = [];
    const plan = new CompiledPlan(
      1,
      'enforce',
      'reject',
      new Map([
        [
          'A',
          {
            index: 0,
            make: (): CompiledDefinition => {
              throw new Error('cannot load');
            },
          },
        ],
      ]),
    );
    plan.onFailure = (name, err) => failures.push(`${name}: ${(err as Error).message}`);
    expect(plan.check({ eventName: 'A', floatValue: 2, payload: { a: 1 } })).toBeNull();
    expect(plan.check({ eventName: 'A', floatValue: null, payload: null })).toBeNull();
    expect(failures).toEqual(['A: cannot load']);
  });
});
