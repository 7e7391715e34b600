import type { ErrorObject, ValidateFunction } from 'ajv';
import type { FlatCheck } from './flat-check';
import type { FloatValueRule, PlanMode, PlannedEvent, UnplannedPolicy, Violation } from './plan.types';

export interface CompiledDefinition {
  /** Its position in the plan's `names`. */
  index: number;
  floatValue: FloatValueRule;
  /** null: the definition has no payload schema. */
  validate: ValidateFunction | null;
  /** The schema's flat form (`flatCheck`), asked first; null when the schema is not flat. */
  quick: FlatCheck | null;
}

/**
 * A definition made runnable on first use (`make`, at most 25 ms: the compiler measured it). A
 * plan of 1,000 definitions made runnable at once held the server's thread for 60–80 ms in young
 * collections alone, however finely the work was sliced; made as events use them, within
 * ingest's sliced validation, each costs its own moment, and names no event uses cost nothing.
 */
export interface DeferredDefinition {
  index: number;
  make(): CompiledDefinition;
}

export type PlanDefinition = CompiledDefinition | DeferredDefinition;

const isDeferred = (def: PlanDefinition): def is DeferredDefinition => 'make' in def;

/** What a definition that could not be made runnable judges: nothing. */
const UNCHECKED: Omit<CompiledDefinition, 'index'> = { floatValue: 'optional', validate: null, quick: null };

/** What a schema sees of an event sent without a payload (never changed by a validator). */
const EMPTY_PAYLOAD = Object.freeze({});

/** A JSON Pointer of the payload (`/plan`) as a path in the event (`payload.plan`). */
function payloadPath(pointer: string): string {
  if (pointer === '') return 'payload';
  return (
    'payload' +
    pointer
      .split('/')
      .slice(1)
      .map((p) => '.' + p.replace(/~1/g, '/').replace(/~0/g, '~'))
      .join('')
  );
}

/**
 * One Ajv error as a violation: the path in the event, and a message that ends with the rule's
 * keyword in parentheses (`payload.plan must be string (type).`).
 */
export function toViolation(e: ErrorObject): Violation {
  let field = payloadPath(e.instancePath);
  const params = e.params as Record<string, unknown>;
  if (typeof params.missingProperty === 'string') field += '.' + params.missingProperty;
  if (typeof params.additionalProperty === 'string') field += '.' + params.additionalProperty;
  let detail = e.message ?? 'is invalid';
  if (e.keyword === 'enum' && Array.isArray(params.allowedValues)) {
    detail += ': ' + params.allowedValues.map((v) => JSON.stringify(v)).join(', ');
  }
  if (e.keyword === 'required') detail = 'is required';
  if (e.keyword === 'additionalProperties') detail = 'is not allowed';
  return { field, code: 'schema_violation', message: `${field} ${detail} (${e.keyword}).` };
}

/**
 * One version of an app's plan, with each event definition's payload schema compiled once.
 * Shared by every request of the app until the plan changes.
 */
export class CompiledPlan {
  /** The planned event names, by definition index. */
  readonly names: readonly string[];
  /** Called once per event name whose validator threw (plans.service.ts logs it). */
  onFailure: ((eventName: string, err: unknown) => void) | null = null;
  private readonly failures = new Set<string>();

  constructor(
    readonly version: number,
    readonly mode: PlanMode,
    readonly unplanned: UnplannedPolicy,
    private readonly definitions: Map<string, PlanDefinition>,
  ) {
    const names: string[] = [];
    for (const [name, def] of definitions) names[def.index] = name;
    this.names = names;
  }

  /** Whether the plan is applied at all (`off` plans are stored only). */
  get active(): boolean {
    return this.mode !== 'off';
  }

  /** The definition of an event name, made runnable if it was not yet; undefined when the plan does not list it. */
  definition(eventName: string): CompiledDefinition | undefined {
    const def = this.definitions.get(eventName);
    if (def === undefined || !isDeferred(def)) return def;
    let made: CompiledDefinition;
    try {
      made = def.make();
    } catch (err) {
      // As a validator that throws: the event name is not held to its schema, and reported.
      this.failed(eventName, err);
      made = { index: def.index, ...UNCHECKED };
    }
    this.definitions.set(eventName, made);
    return made;
  }

  /** The rules `event` breaks, or null when it follows the plan. */
  check(event: PlannedEvent): Violation[] | null {
    return this.verdict(this.definition(event.eventName), event);
  }

  /** As `check`, with the event's definition already looked up (`definition`). */
  verdict(def: CompiledDefinition | undefined, event: PlannedEvent): Violation[] | null {
    if (def === undefined) {
      if (this.unplanned === 'allow') return null;
      return [
        {
          field: 'eventName',
          code: 'unplanned_event',
          message: `The tracking plan does not list the event ${JSON.stringify(event.eventName)} (unplanned).`,
        },
      ];
    }
    let out: Violation[] | null = null;
    if (def.floatValue !== 'optional') {
      const present = event.floatValue !== null;
      if (def.floatValue === 'required' && !present) {
        out = [
          { field: 'floatValue', code: 'schema_violation', message: 'floatValue is required (floatValue).' },
        ];
      } else if (def.floatValue === 'forbidden' && present) {
        out = [
          { field: 'floatValue', code: 'schema_violation', message: 'floatValue is forbidden (floatValue).' },
        ];
      }
    }
    const validate = def.validate;
    if (validate !== null) {
      const payload = event.payload ?? EMPTY_PAYLOAD;
      try {
        // The flat form's yes is final; its "not sure" goes to Ajv, which also names the violations.
        if ((def.quick !== null && def.quick(payload)) || validate(payload)) return out;
      } catch (err) {
        // A validator that throws (no stored plan should make one) judges nothing: the event
        // is not held to its schema, and the batch is never a 500 because of a plan.
        this.failed(event.eventName, err);
        return out;
      }
      out ??= [];
      for (const e of validate.errors!) out.push(toViolation(e));
    }
    return out;
  }

  /** Reports a validator that threw, once per plan version and event name. */
  private failed(eventName: string, err: unknown): void {
    if (this.failures.has(eventName)) return;
    this.failures.add(eventName);
    this.onFailure?.(eventName, err);
  }

  /** Whether these violations reject the event (otherwise they are warnings). */
  rejects(violations: Violation[]): boolean {
    if (this.mode !== 'enforce') return false;
    return violations[0].code !== 'unplanned_event' || this.unplanned === 'reject';
  }
}
