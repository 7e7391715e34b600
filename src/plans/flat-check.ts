import ucs2length from 'ajv/dist/runtime/ucs2length';
import type { LinearRegExp } from './regexp';

/**
 * A quick yes of a payload schema: true only when the payload follows the schema. false means
 * "not sure", and the full validator (Ajv) then gives the verdict and its violations.
 */
export type FlatCheck = (payload: object) => boolean;

type Raw = Record<string, unknown>;

// The keywords the flat form understands. Any other keyword, at either level, leaves the
// definition to Ajv alone. Annotations change no verdict.
const ANNOTATIONS = new Set([
  'description',
  'title',
  '$comment',
  'examples',
  'default',
  'deprecated',
  'readOnly',
  'writeOnly',
]);
const TOP_KEYWORDS = new Set(['type', 'properties', 'required', 'additionalProperties', ...ANNOTATIONS]);
const PROPERTY_KEYWORDS = new Set([
  'type',
  'enum',
  'const',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'minLength',
  'maxLength',
  'pattern',
  ...ANNOTATIONS,
]);
const TYPES = new Set(['string', 'integer', 'number', 'boolean', 'null']);

function isObject(v: unknown): v is Raw {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isPrimitive(v: unknown): v is string | number | boolean | null {
  return (
    v === null ||
    typeof v === 'string' ||
    typeof v === 'boolean' ||
    (typeof v === 'number' && Number.isFinite(v))
  );
}

function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0;
}

function isNumber(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v);
}

/**
 * Code points of a string, as JSON Schema counts its length: Ajv's own counter, so that the
 * flat check and the validator it stands in for can never count differently.
 */
export const codePoints: (s: string) => number = ucs2length;

/** The test of one type name on `v`, as Ajv writes it (numbers are finite, integers whole). */
function typeTest(type: string): string {
  switch (type) {
    case 'string':
      return 'typeof v === "string"';
    case 'boolean':
      return 'typeof v === "boolean"';
    case 'null':
      return 'v === null';
    case 'number':
      return '(typeof v === "number" && isFinite(v))';
    default:
      return '(typeof v === "number" && Number.isInteger(v))';
  }
}

/** The patterns of one schema, each built once, by their source. */
class Patterns {
  readonly list: LinearRegExp[] = [];
  private readonly index = new Map<string, number>();

  constructor(private readonly regExp: RegExpFactory) {}

  /** The expression of the matcher of `pattern` in the generated code; throws if it has none. */
  ref(pattern: string): string {
    let i = this.index.get(pattern);
    if (i === undefined) {
      this.list.push(this.regExp(pattern, 'u'));
      this.index.set(pattern, (i = this.list.length - 1));
    }
    return `re[${i}]`;
  }
}

/** The statements that return false unless `v` (defined) follows one property's schema; null if unsupported. */
function propertyCode(schema: unknown, patterns: Patterns): string | null {
  if (schema === true) return '';
  if (!isObject(schema)) return null;
  for (const key of Object.keys(schema)) if (!PROPERTY_KEYWORDS.has(key)) return null;
  const s = schema;
  const out: string[] = [];
  // With one type known, the rules of that type need no test of their own.
  let onlyStrings = false;
  let onlyNumbers = false;
  if (s.type !== undefined) {
    const types = Array.isArray(s.type) ? s.type : [s.type];
    if (types.length === 0 || !types.every((t) => typeof t === 'string' && TYPES.has(t))) return null;
    out.push(`if (!(${(types as string[]).map(typeTest).join(' || ')})) return false;`);
    onlyStrings = types.every((t) => t === 'string');
    onlyNumbers = types.every((t) => t === 'integer' || t === 'number');
  }
  if (s.enum !== undefined) {
    if (!Array.isArray(s.enum) || s.enum.length === 0 || !s.enum.every(isPrimitive)) return null;
    out.push(`if (!(${s.enum.map((e) => `v === ${JSON.stringify(e)}`).join(' || ')})) return false;`);
  }
  if (s.const !== undefined) {
    if (!isPrimitive(s.const)) return null;
    out.push(`if (v !== ${JSON.stringify(s.const)}) return false;`);
  }
  const numbers: string[] = [];
  const bounds: [string, string][] = [
    ['minimum', '<'],
    ['maximum', '>'],
    ['exclusiveMinimum', '<='],
    ['exclusiveMaximum', '>='],
  ];
  for (const [keyword, fails] of bounds) {
    const limit = s[keyword];
    if (limit === undefined) continue;
    if (!isNumber(limit)) return null;
    numbers.push(`if (v ${fails} ${JSON.stringify(limit)}) return false;`);
  }
  const strings: string[] = [];
  if (s.maxLength !== undefined) {
    if (!isCount(s.maxLength)) return null;
    // UTF-16 units bound the code points from above: only a long string is counted.
    strings.push(`if (v.length > ${s.maxLength} && cp(v) > ${s.maxLength}) return false;`);
  }
  if (s.minLength !== undefined) {
    if (!isCount(s.minLength)) return null;
    // And from below by half: only a short string is counted.
    strings.push(`if (v.length < ${2 * s.minLength} && cp(v) < ${s.minLength}) return false;`);
  }
  if (s.pattern !== undefined) {
    if (typeof s.pattern !== 'string') return null;
    let re: string;
    try {
      re = patterns.ref(s.pattern);
    } catch {
      return null;
    }
    strings.push(`if (!${re}.test(v)) return false;`);
  }
  if (numbers.length)
    out.push(onlyNumbers ? numbers.join(' ') : `if (typeof v === "number") { ${numbers.join(' ')} }`);
  if (strings.length)
    out.push(onlyStrings ? strings.join(' ') : `if (typeof v === "string") { ${strings.join(' ')} }`);
  return out.join(' ');
}

/** Builds a pattern's matcher, as Ajv's `code.regExp` does (the same engine, so the same verdicts). */
export type RegExpFactory = (pattern: string, flags: string) => LinearRegExp;

/**
 * The flat form of a payload schema: an object whose properties are scalars with type, enum,
 * const, bounds, lengths and patterns, with `required` and `additionalProperties: false`. Most
 * tracking plans are written this way. It compiles to one small function that reads each listed
 * property once and counts the payload's keys instead of looking each one up, several times
 * cheaper than the general validator in a busy server. It answers true only when Ajv would; any
 * schema outside the flat form gets null (Ajv alone).
 *
 * Inherited names (`constructor`, `toString`) are left to Ajv: a plain object answers for them
 * through its prototype, which the key count would not see.
 */
export function flatCheck(schema: unknown, regExp: RegExpFactory): FlatCheck | null {
  if (schema === true) return () => true;
  if (!isObject(schema)) return null;
  for (const key of Object.keys(schema)) if (!TOP_KEYWORDS.has(key)) return null;
  if (schema.type !== undefined && schema.type !== 'object') return null;
  const properties = schema.properties ?? {};
  if (!isObject(properties)) return null;
  const required = schema.required ?? [];
  if (!Array.isArray(required) || !required.every((r) => typeof r === 'string')) return null;
  const closed = schema.additionalProperties === false;
  if (schema.additionalProperties !== undefined && schema.additionalProperties !== true && !closed)
    return null;

  const patterns = new Patterns(regExp);
  const lines: string[] = [];
  if (closed) lines.push('let n = 0; for (const k in p) n++; let seen = 0;');
  const names = new Set([...Object.keys(properties), ...(required as string[])]);
  for (const name of names) {
    if (name in Object.prototype) return null;
    const rule = name in properties ? propertyCode(properties[name], patterns) : '';
    if (rule === null) return null;
    const isRequired = (required as string[]).includes(name);
    // A required name that the properties do not list fails a closed schema; Ajv says which.
    if (closed && !(name in properties)) return null;
    const count = closed ? 'seen++; ' : '';
    lines.push(
      `v = p[${JSON.stringify(name)}]; if (v !== undefined) { ${count}${rule} }` +
        (isRequired ? ' else return false;' : ''),
    );
  }
  lines.push(closed ? 'return seen === n;' : 'return true;');
  const body = `return function flatCheck(p) { let v; ${lines.join('\n')} };`;
  // The code holds names and values only as JSON literals (JSON.stringify), never schema text.
  const make = new Function('re', 'cp', body) as (re: LinearRegExp[], cp: (s: string) => number) => FlatCheck;
  return make(patterns.list, codePoints);
}
