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
});
