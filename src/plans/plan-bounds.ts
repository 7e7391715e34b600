import { isControlCode } from '@app/common/control-characters';
import type { PlanProblem } from './plan.types';

/** The most event definitions one plan may hold. */
export const MAX_PLAN_EVENTS = 2000;
/** The most schema nodes (every JSON value inside the payload schemas) of one plan. */
export const MAX_PLAN_NODES = 50_000;
/**
 * The most JSON values of a whole plan: the schema nodes, and the definitions' own fields many
 * times over. Only a body that is mostly something else (a long array in an unknown field) comes
 * near it, and the walk stops there.
 */
export const MAX_PLAN_VALUES = 100_000;
/** The longest pattern (`pattern`, or a key of `patternProperties`), in UTF-16 units. */
export const MAX_PATTERN_LENGTH = 1000;
/** The deepest a payload schema nests: the schema itself is level 1, each object or array inside one more. */
export const MAX_SCHEMA_DEPTH = 32;
/** Past this many problems the list stops: one is enough to refuse the plan. */
const MAX_PROBLEMS = 100;
/** Levels above a payload schema: the plan, `events`, the definition. */
const PAYLOAD_LEVEL = 3;

// Keywords that move a `$ref`'s base or resolve it at run time: a plan's references are plain
// pointers into the payload schema's own `$defs`, checked here before anything compiles them.
const REFUSED_KEYWORDS = new Set([
  '$id',
  '$anchor',
  '$dynamicRef',
  '$dynamicAnchor',
  '$recursiveRef',
  '$recursiveAnchor',
]);
// Keywords whose values are data, not schemas: a `$ref` key inside `const` is a value like any other.
const DATA_KEYWORDS = new Set(['enum', 'const', 'default', 'examples']);
const LOCAL_REF = /^#\/\$defs\/([^/]+)$/;

type Raw = Record<string, unknown>;

function isObject(v: unknown): v is Raw {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function fmt(n: number): string {
  return n.toLocaleString('en-US');
}

/** What a value is to JSON Schema: a schema, a map of schemas by name, or data. */
type Kind = 'schema' | 'map' | 'data';

/** One value still to visit. */
interface Visit {
  value: unknown;
  /** Where it sits, made into a path only for a problem (`pathOf`): most values have none. */
  parent: Visit | null;
  /** Its position in an array (-1 in an object). */
  index: number;
  /** Levels below the plan (the plan is 0). */
  depth: number;
  /** The payload schema it belongs to, or null outside the payloads. */
  schema: PayloadSchema | null;
  kind: Kind;
  /** The root `$defs` entry it sits in, or null. */
  def: string | null;
  /** The key it sits under in its parent object (null in an array). */
  key: string | null;
}

/** What the walk learns of one payload schema: its `$defs` names and who refers to whom. */
interface PayloadSchema {
  at: Visit;
  defs: Set<string>;
  /** `$defs` name (or '' for the schema outside them) → the names its `$ref`s point at. */
  refs: Map<string, Set<string>>;
  deep: boolean;
}

// Keywords whose value is an object of schemas by name.
const MAP_KEYWORDS = new Set(['properties', '$defs', 'definitions', 'patternProperties', 'dependentSchemas']);

/** What the value under `key` of a `parent` value is. */
function childKind(parent: Kind, key: string | null): Kind {
  if (parent === 'data') return 'data';
  if (parent === 'map') return 'schema';
  if (key === null) return 'schema';
  if (DATA_KEYWORDS.has(key)) return 'data';
  return MAP_KEYWORDS.has(key) ? 'map' : 'schema';
}

/** The path of a value in the plan as problems name it: `events.E.payload.enum[0]`. */
function pathOf(v: Visit): string {
  const parts: string[] = [];
  for (let at: Visit | null = v; at !== null && at.parent !== null; at = at.parent) {
    parts.push(at.index >= 0 ? `[${at.index}]` : at.parent.parent === null ? at.key! : `.${at.key!}`);
  }
  return parts.reverse().join('');
}

/** The path of the member `key` of the object `v`. */
function childPath(v: Visit, key: string): string {
  const base = pathOf(v);
  return base === '' ? key : `${base}.${key}`;
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * The bounds of a plan (docs/ingest.md, "Tracking plans"), checked before anything compiles it:
 * the number of definitions and schema nodes, pattern lengths, nesting, references that stay in
 * the payload schema's own `$defs` and never recur, and strings PostgreSQL's jsonb takes (no NUL,
 * no lone surrogate; no control character in a key). The walk is a loop over an explicit stack
 * that never goes deeper than the bound, so a body nested thousands of levels costs no recursion.
 */
export function planBoundProblems(raw: unknown): PlanProblem[] {
  const walk = new BoundsWalk();
  walk.run(raw);
  return walk.problems;
}

class BoundsWalk {
  readonly problems: PlanProblem[] = [];
  private nodes = 0;
  private values = 0;
  private tooMany = false;
  private readonly schemas: PayloadSchema[] = [];

  run(raw: unknown): void {
    if (isObject(raw) && isObject(raw.events) && Object.keys(raw.events).length > MAX_PLAN_EVENTS) {
      this.add('events', `A plan may hold at most ${fmt(MAX_PLAN_EVENTS)} event definitions.`);
      return;
    }
    const stack: Visit[] = [
      { value: raw, parent: null, index: -1, depth: 0, schema: null, kind: 'data', def: null, key: null },
    ];
    while (stack.length > 0 && this.problems.length < MAX_PROBLEMS) {
      const visit = this.enter(stack.pop()!);
      if (visit.schema !== null && ++this.nodes > MAX_PLAN_NODES) {
        this.add('events', `A plan may hold at most ${fmt(MAX_PLAN_NODES)} schema nodes.`);
        return;
      }
      this.values++;
      this.visit(visit, stack);
      if (this.tooMany) {
        this.add('', `A plan may hold at most ${fmt(MAX_PLAN_VALUES)} JSON values in all.`);
        return;
      }
    }
    for (const schema of this.schemas) this.checkCycles(schema);
  }

  private add(path: string, message: string): void {
    if (this.problems.length < MAX_PROBLEMS) this.problems.push({ path, message });
  }

  /** Starts a payload schema at `events.<name>.payload`. */
  private enter(v: Visit): Visit {
    if (v.schema !== null || v.depth !== PAYLOAD_LEVEL || v.key !== 'payload') return v;
    const defs = isObject(v.value) && isObject(v.value.$defs) ? Object.keys(v.value.$defs) : [];
    const schema: PayloadSchema = { at: v, defs: new Set(defs), refs: new Map(), deep: false };
    this.schemas.push(schema);
    return { ...v, schema, kind: 'schema' };
  }

  private visit(v: Visit, stack: Visit[]): void {
    const { value } = v;
    if (typeof value === 'string') {
      this.checkString(value, v);
      if (v.schema !== null) this.checkSchemaString(v, value);
      return;
    }
    if (typeof value !== 'object' || value === null) return;
    // The payload schema is level 1.
    if (v.depth - PAYLOAD_LEVEL + 1 > MAX_SCHEMA_DEPTH) {
      if (v.schema === null || !v.schema.deep) {
        this.add(pathOf(v), `A schema may nest at most ${MAX_SCHEMA_DEPTH} levels.`);
        if (v.schema !== null) v.schema.deep = true;
      }
      return;
    }
    const depth = v.depth + 1;
    // Members are pushed all at once: a long array is refused before, not after, they are.
    const members = Array.isArray(value) ? value.length : Object.keys(value).length;
    if (this.values + stack.length + members > MAX_PLAN_VALUES) {
      this.tooMany = true;
      return;
    }
    if (Array.isArray(value)) {
      const kind = childKind(v.kind, null);
      for (let i = value.length - 1; i >= 0; i--) {
        stack.push({ ...v, value: value[i], parent: v, index: i, depth, kind, key: null });
      }
      return;
    }
    const keys = Object.keys(value);
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i];
      this.checkKey(key, v, v.schema !== null && v.kind === 'map' && v.key === 'patternProperties');
      if (v.schema !== null && v.kind === 'schema' && REFUSED_KEYWORDS.has(key)) {
        this.add(
          childPath(v, key),
          `${key} is not supported in a plan: a $ref names an entry of the payload schema's own $defs.`,
        );
        continue;
      }
      // A root `$defs` entry: the `$defs` object one level below the payload schema.
      const def =
        v.def ?? (v.kind === 'map' && v.key === '$defs' && v.depth === PAYLOAD_LEVEL + 1 ? key : null);
      stack.push({
        value: (value as Raw)[key],
        parent: v,
        index: -1,
        depth,
        schema: v.schema,
        kind: childKind(v.kind, key),
        def,
        key,
      });
    }
  }

  private checkString(s: string, v: Visit): void {
    if (s.includes('\u0000')) this.add(pathOf(v), 'Strings in a plan must not contain NUL (U+0000).');
    else if (LONE_SURROGATE.test(s))
      this.add(pathOf(v), 'Strings in a plan must be valid Unicode (no lone surrogate).');
  }

  /** A key of the object `v`. */
  private checkKey(key: string, v: Visit, isPattern: boolean): void {
    for (let i = 0; i < key.length; i++) {
      if (isControlCode(key.charCodeAt(i))) {
        this.add(childPath(v, key), 'Keys in a plan must not contain control characters.');
        return;
      }
    }
    if (LONE_SURROGATE.test(key))
      this.add(childPath(v, key), 'Keys in a plan must be valid Unicode (no lone surrogate).');
    else if (isPattern && key.length > MAX_PATTERN_LENGTH) {
      this.add(childPath(v, key), `A pattern may be at most ${fmt(MAX_PATTERN_LENGTH)} characters.`);
    }
  }

  /** `pattern` lengths and `$ref` targets, for strings in schema position. */
  private checkSchemaString(v: Visit, s: string): void {
    if (v.kind !== 'schema') return;
    if (v.key === 'pattern' && s.length > MAX_PATTERN_LENGTH) {
      this.add(pathOf(v), `A pattern may be at most ${fmt(MAX_PATTERN_LENGTH)} characters.`);
    }
    if (v.key !== '$ref') return;
    if (s === '#') {
      this.add(pathOf(v), 'A $ref may not be recursive: "#" is the schema itself.');
      return;
    }
    const m = LOCAL_REF.exec(s);
    const name = m === null ? null : m[1].replace(/~1/g, '/').replace(/~0/g, '~');
    if (name === null || !v.schema!.defs.has(name)) {
      this.add(pathOf(v), `A $ref must point into the payload schema's own $defs ("#/$defs/<name>").`);
      return;
    }
    const from = v.def ?? '';
    let targets = v.schema!.refs.get(from);
    if (targets === undefined) v.schema!.refs.set(from, (targets = new Set()));
    targets.add(name);
  }

  /** Refuses a cycle of `$ref`s through `$defs` (a definition reaching itself). */
  private checkCycles(schema: PayloadSchema): void {
    const state = new Map<string, 1 | 2>();
    for (const start of schema.refs.keys()) {
      if (state.has(start)) continue;
      // Iterative depth-first search: 1 on the current path, 2 done.
      const stack: [string, Iterator<string>][] = [[start, (schema.refs.get(start) ?? new Set()).values()]];
      state.set(start, 1);
      while (stack.length > 0) {
        const [node, next] = stack[stack.length - 1];
        const step = next.next();
        if (step.done) {
          state.set(node, 2);
          stack.pop();
          continue;
        }
        const to = step.value;
        if (state.get(to) === 1) {
          this.add(
            `${pathOf(schema.at)}.$defs.${to}`,
            `A $ref may not be recursive: $defs.${to} refers back to itself.`,
          );
          return;
        }
        if (!state.has(to)) {
          state.set(to, 1);
          stack.push([to, (schema.refs.get(to) ?? new Set()).values()]);
        }
      }
    }
  }
}
