import Ajv2020 from 'ajv/dist/2020';
import standaloneCode from 'ajv/dist/standalone';
import type { ValidateFunction } from 'ajv';
import { isControlCode } from '@app/common/control-characters';
import { CompiledPlan, type CompiledDefinition } from './compiled-plan';
import { flatCheck } from './flat-check';
import { MAX_PLAN_EVENTS, planBoundProblems } from './plan-bounds';
import { linearRegExps, type LinearRegExpFactory } from './regexp';
import {
  FLOAT_VALUE_RULES,
  PLAN_MODES,
  UNPLANNED_POLICIES,
  type EventDefinition,
  type PlanProblem,
  type TrackingPlan,
} from './plan.types';

export { MAX_PLAN_EVENTS };
const MAX_DESCRIPTION = 1000;
const MAX_EVENT_NAME = 200;

type Raw = Record<string, unknown>;

function isObject(v: unknown): v is Raw {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function oneOf<T extends string>(value: unknown, allowed: readonly T[]): value is T {
  return typeof value === 'string' && (allowed as readonly string[]).includes(value);
}

/**
 * A fresh validator per plan, so that compiled schemas of old versions are freed with it. It
 * keeps each validator's source, which `standaloneCode` turns into a module of its own.
 */
function newAjv(regExp: LinearRegExpFactory): Ajv2020 {
  return new Ajv2020({
    allErrors: true,
    strict: true,
    code: { regExp, source: true, lines: false },
    // Remote references are never fetched: a plan is self-contained.
    loadSchema: undefined,
  });
}

function eventNameProblem(name: string): string | null {
  if (name.length === 0 || name.length > MAX_EVENT_NAME) {
    return `An event name must be 1 to ${MAX_EVENT_NAME} characters.`;
  }
  for (let i = 0; i < name.length; i++) {
    if (isControlCode(name.charCodeAt(i))) return 'An event name must not contain control characters.';
  }
  return null;
}

function pointerPath(base: string, pointer: string): string {
  return pointer === ''
    ? base
    : base +
        pointer
          .split('/')
          .slice(1)
          .map((p) => '.' + p)
          .join('');
}

/** Checks one event definition's fields; returns its normalised form. */
function readDefinition(raw: unknown, path: string, problems: PlanProblem[]): EventDefinition {
  if (!isObject(raw)) {
    problems.push({ path, message: 'An event definition must be an object.' });
    return {};
  }
  const def: EventDefinition = {};
  for (const key of Object.keys(raw)) {
    if (key !== 'description' && key !== 'floatValue' && key !== 'payload') {
      problems.push({ path: `${path}.${key}`, message: 'Unknown field of an event definition.' });
    }
  }
  if (raw.description !== undefined) {
    if (typeof raw.description !== 'string' || raw.description.length > MAX_DESCRIPTION) {
      problems.push({
        path: `${path}.description`,
        message: `description must be a string of at most ${MAX_DESCRIPTION} characters.`,
      });
    } else def.description = raw.description;
  }
  if (raw.floatValue !== undefined) {
    if (!oneOf(raw.floatValue, FLOAT_VALUE_RULES)) {
      problems.push({
        path: `${path}.floatValue`,
        message: `floatValue must be one of ${FLOAT_VALUE_RULES.join(', ')}.`,
      });
    } else def.floatValue = raw.floatValue;
  }
  if (raw.payload !== undefined) {
    if (!isObject(raw.payload) && typeof raw.payload !== 'boolean') {
      problems.push({
        path: `${path}.payload`,
        message: 'payload must be a JSON Schema (an object or a boolean).',
      });
    } else def.payload = raw.payload;
  }
  return def;
}

/** Reads the plan's top level and its definitions; every problem goes to `problems`. */
function readPlan(raw: unknown, problems: PlanProblem[]): TrackingPlan {
  const plan: TrackingPlan = { mode: 'off', unplanned: 'allow', events: {} };
  if (!isObject(raw)) {
    problems.push({ path: '', message: 'A plan must be a JSON object.' });
    return plan;
  }
  for (const key of Object.keys(raw)) {
    if (key !== 'mode' && key !== 'unplanned' && key !== 'events') {
      problems.push({ path: key, message: 'Unknown field of a plan.' });
    }
  }
  if (!oneOf(raw.mode, PLAN_MODES)) {
    problems.push({ path: 'mode', message: `mode is required: one of ${PLAN_MODES.join(', ')}.` });
  } else plan.mode = raw.mode;
  if (raw.unplanned !== undefined) {
    if (!oneOf(raw.unplanned, UNPLANNED_POLICIES)) {
      problems.push({
        path: 'unplanned',
        message: `unplanned must be one of ${UNPLANNED_POLICIES.join(', ')}.`,
      });
    } else plan.unplanned = raw.unplanned;
  }
  if (raw.events === undefined) return plan;
  if (!isObject(raw.events)) {
    problems.push({ path: 'events', message: 'events must be an object of event definitions by name.' });
    return plan;
  }
  const names = Object.keys(raw.events);
  if (names.length > MAX_PLAN_EVENTS) {
    problems.push({
      path: 'events',
      message: `A plan may hold at most ${MAX_PLAN_EVENTS.toLocaleString('en-US')} event definitions.`,
    });
  }
  for (const name of names) {
    const path = `events.${name}`;
    const nameProblem = eventNameProblem(name);
    if (nameProblem) problems.push({ path, message: nameProblem });
    plan.events[name] = readDefinition(raw.events[name], path, problems);
  }
  return plan;
}

export type PlanCompilation =
  { ok: true; plan: TrackingPlan; compiled: CompiledPlan } | { ok: false; problems: PlanProblem[] };

/**
 * A plan checked for its bounds and fields. Within the bounds: the normalised plan and the
 * problems of its fields, if any (its schemas are still compiled, to report theirs too). Past a
 * bound: only those problems, and nothing may compile it.
 */
export type PlanCheck =
  { ok: true; plan: TrackingPlan; problems: PlanProblem[] } | { ok: false; problems: PlanProblem[] };

/**
 * Checks a plan's bounds (plan-bounds.ts) and then its fields, without compiling anything: cheap,
 * and bounded by the body's size. A plan past a bound is not read further.
 */
export function checkPlan(raw: unknown): PlanCheck {
  const bounds = planBoundProblems(raw);
  if (bounds.length) return { ok: false, problems: bounds };
  const problems: PlanProblem[] = [];
  const plan = readPlan(raw, problems);
  return { ok: true, plan, problems };
}

/** One definition as compiled: its validator's code as a module of its own (null: no payload schema). */
export interface DefinitionSource {
  name: string;
  source: string | null;
}

export type SourceCompilation =
  { ok: true; sources: DefinitionSource[] } | { ok: false; problems: PlanProblem[] };

/**
 * Compiles each event definition's payload schema (Ajv, draft 2020-12, strict mode, every error
 * reported, patterns on a linear-time engine) into the source of its validator. The costly step,
 * run in the compiler's process (plan-compile.worker.ts): the sources are all the caller gets back.
 */
export function compileSources(plan: TrackingPlan, regExp: LinearRegExpFactory): SourceCompilation {
  const problems: PlanProblem[] = [];
  const ajv = newAjv(regExp);
  const sources: DefinitionSource[] = [];
  for (const [name, def] of Object.entries(plan.events)) {
    const path = `events.${name}.payload`;
    if (def.payload === undefined) {
      sources.push({ name, source: null });
      continue;
    }
    if (!ajv.validateSchema(def.payload)) {
      for (const e of ajv.errors ?? []) {
        problems.push({
          path: pointerPath(path, e.instancePath),
          message: `${e.message ?? 'is invalid'} (${e.keyword}).`,
        });
      }
      continue;
    }
    try {
      const validate = ajv.compile(def.payload);
      // Copied into one flat string: Ajv builds it of many concatenated pieces, which V8 would
      // otherwise keep, at tens of kilobytes per definition.
      const source = Buffer.from(standaloneCode(ajv, validate), 'utf8').toString('utf8');
      sources.push({ name, source });
      // Each source stands alone: the validator Ajv keeps is no longer needed.
      ajv.removeSchema(def.payload);
    } catch (err) {
      problems.push({ path, message: (err as Error).message });
    }
  }
  return problems.length ? { ok: false, problems } : { ok: true, sources };
}

// The helpers Ajv's standalone code requires: only its own run-time modules.
const RUNTIME_MODULE = /^ajv\/dist\/runtime\/(ucs2length|equal|uri|validation_error|timestamp|quote|re2)$/;

function runtimeRequire(id: string): unknown {
  if (!RUNTIME_MODULE.test(id)) throw new Error(`A plan's validator may not load ${id}`);
  return require(id) as unknown;
}

/** Makes a validator from the source `compileSources` gave, with `regExp` for its patterns. */
function instantiateValidator(source: string, regExp: LinearRegExpFactory): ValidateFunction {
  const module = { exports: {} as unknown };
  // The source is Ajv's standalone code: schema values appear in it only as escaped literals.
  new Function('module', 'require', 'linearRegExp', source)(module, runtimeRequire, regExp);
  return module.exports as ValidateFunction;
}

/**
 * One definition made runnable: its validator and its flat form (flat-check.ts). `regExp` is
 * shared by the whole plan, so that a pattern used many times is compiled once.
 */
export function instantiateDefinition(
  def: EventDefinition,
  source: string | null,
  index: number,
  regExp: LinearRegExpFactory,
): CompiledDefinition {
  const validate = source === null ? null : instantiateValidator(source, regExp);
  const quick = def.payload === undefined ? null : flatCheck(def.payload, regExp);
  return { index, floatValue: def.floatValue ?? 'optional', validate, quick };
}

/**
 * Validates and compiles a plan in the calling thread: every step the compiler's process and the
 * server take (plan-worker.ts), in one go. For tests and measurements; the server never calls it.
 */
export function compilePlan(raw: unknown, version: number): PlanCompilation {
  const checked = checkPlan(raw);
  if (!checked.ok) return checked;
  const compiled = compileSources(checked.plan, linearRegExps());
  if (!compiled.ok) return { ok: false, problems: [...checked.problems, ...compiled.problems] };
  if (checked.problems.length) return { ok: false, problems: checked.problems };
  const regExp = linearRegExps();
  const definitions = new Map<string, CompiledDefinition>();
  for (const { name, source } of compiled.sources) {
    definitions.set(name, instantiateDefinition(checked.plan.events[name], source, definitions.size, regExp));
  }
  const plan = checked.plan;
  return { ok: true, plan, compiled: new CompiledPlan(version, plan.mode, plan.unplanned, definitions) };
}

/** The most CPU one definition's validator may take to make runnable, in ms (see `compileInWorker`). */
export const MAX_DEFINITION_MS = 25;

/**
 * Makes the definition runnable, timed in CPU time (the compiler's process): what the server's
 * thread would spend on it, without the time the compiler, below the server's priority, waited
 * for a core on a busy machine.
 */
function instantiationMs(
  plan: TrackingPlan,
  item: DefinitionSource,
  index: number,
  regExp: LinearRegExpFactory,
) {
  const started = process.cpuUsage();
  const made = instantiateDefinition(plan.events[item.name], item.source, index, regExp);
  const spent = process.cpuUsage(started);
  return { made, ms: (spent.user + spent.system) / 1000 };
}

/**
 * The compiler process's whole task: compiles the plan's sources, then makes each definition runnable
 * as the server will, holding them all until the end. So the compiler's heap cap bounds what the
 * server will hold for the plan, and a definition that takes longer than MAX_DEFINITION_MS to
 * make runnable (it would stop the server's other requests that long) is refused.
 */
export function compileInWorker(plan: TrackingPlan): SourceCompilation {
  const compiled = compileSources(plan, linearRegExps());
  if (!compiled.ok) return compiled;
  const regExp = linearRegExps();
  const held: CompiledDefinition[] = [];
  const problems: PlanProblem[] = [];
  for (const item of compiled.sources) {
    const path = `events.${item.name}.payload`;
    try {
      let { made, ms } = instantiationMs(plan, item, held.length, regExp);
      // Once more on a fresh engine before refusing: a collection may have fallen in the first run.
      if (ms > MAX_DEFINITION_MS) ({ made, ms } = instantiationMs(plan, item, held.length, linearRegExps()));
      if (ms > MAX_DEFINITION_MS) {
        problems.push({
          path,
          message:
            `Compiling this definition costs ${Math.round(ms)} ms, more than the server allows ` +
            `(${MAX_DEFINITION_MS} ms): split or simplify its schema.`,
        });
      }
      held.push(made);
    } catch (err) {
      // What the server could not load is refused here, not met at ingest.
      problems.push({ path, message: (err as Error).message });
    }
  }
  return problems.length ? { ok: false, problems } : compiled;
}
