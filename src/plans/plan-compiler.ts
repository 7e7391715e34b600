import Ajv2020 from 'ajv/dist/2020';
import { isControlCode } from '@app/common/control-characters';
import { CompiledPlan, type CompiledDefinition } from './compiled-plan';
import { flatCheck, type FlatCheck } from './flat-check';
import { linearRegExp } from './regexp';
import {
  FLOAT_VALUE_RULES,
  PLAN_MODES,
  UNPLANNED_POLICIES,
  type EventDefinition,
  type PlanProblem,
  type TrackingPlan,
} from './plan.types';

/** The most event definitions one plan may hold. */
export const MAX_PLAN_EVENTS = 1000;
const MAX_DESCRIPTION = 1000;
const MAX_EVENT_NAME = 200;

type Raw = Record<string, unknown>;

function isObject(v: unknown): v is Raw {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function oneOf<T extends string>(value: unknown, allowed: readonly T[]): value is T {
  return typeof value === 'string' && (allowed as readonly string[]).includes(value);
}

/** A fresh validator per plan, so that compiled schemas of old versions are freed with it. */
function newAjv(): Ajv2020 {
  return new Ajv2020({
    allErrors: true,
    strict: true,
    code: { regExp: linearRegExp },
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
    problems.push({ path: 'events', message: `A plan may define at most ${MAX_PLAN_EVENTS} events.` });
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
 * Validates a plan fully and compiles each event definition's payload schema once (Ajv, draft
 * 2020-12, strict mode, every error reported, patterns on a linear-time engine). Either the
 * normalised plan and its compiled form, or every problem found.
 */
export function compilePlan(raw: unknown, version: number): PlanCompilation {
  const problems: PlanProblem[] = [];
  const plan = readPlan(raw, problems);
  const ajv = newAjv();
  const definitions = new Map<string, CompiledDefinition>();
  for (const [name, def] of Object.entries(plan.events)) {
    const path = `events.${name}.payload`;
    let validate = null;
    let quick: FlatCheck | null = null;
    if (def.payload !== undefined) {
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
        validate = ajv.compile(def.payload);
        quick = flatCheck(def.payload, linearRegExp);
      } catch (err) {
        problems.push({ path, message: (err as Error).message });
        continue;
      }
    }
    definitions.set(name, {
      index: definitions.size,
      floatValue: def.floatValue ?? 'optional',
      validate,
      quick,
    });
  }
  if (problems.length) return { ok: false, problems };
  return { ok: true, plan, compiled: new CompiledPlan(version, plan.mode, plan.unplanned, definitions) };
}
