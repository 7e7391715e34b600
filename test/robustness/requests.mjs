// Robustness: requests generated from the OpenAPI document (docs/openapi.json) with fast-check,
// sent over HTTP to a real server. Every operation gets bodies and query strings that follow its
// schema, mixed with hostile values: deep nesting, extreme and offset dates, huge numbers, odd
// Unicode, control characters, wrong types, raw JSON text and bad percent-encoding. The
// invariant: no answer is a 5xx, and every 4xx is problem+json with a code.
//
//
// This file makes the requests; test/robustness/run.mjs sends them (`npm run test:robustness`, in
// CI), and `npm run bench -- --robustness` records the figures of a long run.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { percentEncode, RAW_QUERY_FRAGMENTS } from '../support/query-text.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const OPENAPI_FILE = path.join(ROOT, 'docs', 'openapi.json');

// ---- hostile values ---------------------------------------------------------------------------

/** JSON texts that JS values cannot express (or that JSON.stringify could not even write). */
const RAW_JSON = [
  '{"a":'.repeat(6000) + '1' + '}'.repeat(6000),
  '['.repeat(50_000) + ']'.repeat(50_000),
  '{"a":'.repeat(300) + '[]' + '}'.repeat(300),
  '1e400',
  '-1e400',
  '123456789012345678901234567890',
  '-0',
  '0.0000000000000000000000000000001',
  '"\\ud800"',
  '"\\u0000"',
  '"a\\udfffb"',
];
const rawToken = (i) => `__raw_json_${i}__`;

const nastyString = fc.constantFrom(
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\u0001\u001f\u007f',
  '\u0085\u009f',
  'tab\there',
  'line\nbreak\r',
  '\ud800',
  '\udfff\ud800',
  '\ufeff',
  '\u202e\u2066',
  '\u200d\u200b',
  '𝕿𝖆𝖑𝖑𝖞',
  'e\u0301\u0301\u0301\u0301',
  '👩‍👩‍👧‍👦',
  "'; DROP TABLE events; --",
  '${jndi:ldap://x}',
  '<script>alert(1)</script>',
  '__proto__',
  'constructor',
  '%00%ff',
  'a'.repeat(201),
  'b'.repeat(1025),
  'c'.repeat(40_000),
);

const extremeDate = fc.constantFrom(
  '9999-12-31T23:30:00-01:00',
  '9999-12-31T23:59:59.999Z',
  '9999-12-31T23:59:59.999-00:01',
  '1000-01-01T00:00:00+00:01',
  '1000-01-01T00:30:00+01:00',
  '0999-12-31',
  '0000-01-01',
  '9999-12-31',
  '10000-01-01',
  '+275760-09-13T00:00:00Z',
  '-000001-01-01T00:00:00Z',
  '2026-02-30',
  '2024-02-29',
  '2026-13-01',
  '2026-11-21T24:00:00Z',
  '2026-11-21T10:20:30+24:00',
  '2026-11-21T10:20:30.1234567891Z',
  '2026-11-21t10:20z',
  '8640000000000000',
  '8640000000000001',
  '253402300799999',
  '253402300800000',
  '999999999999999',
  '9999999999999999',
);

const hugeNumber = fc.constantFrom(
  0,
  -0,
  -1,
  1e308,
  -1e308,
  5e-324,
  Number.MAX_SAFE_INTEGER,
  Number.MAX_SAFE_INTEGER + 2,
  2 ** 63,
  -(2 ** 63),
  8_640_000_000_000_001,
  0.1,
);

const rawJson = fc.nat(RAW_JSON.length - 1).map(rawToken);

/** Any JSON-ish value, hostile or not, nested a little. */
const anyValue = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.string({ maxLength: 30 }),
    nastyString,
    fc.integer(),
    fc.double(),
    hugeNumber,
    fc.boolean(),
    fc.constant(null),
    extremeDate,
    rawJson,
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.oneof(fc.string({ maxLength: 10 }), nastyString), tie('value'), { maxKeys: 4 }),
  ),
})).value;

// ---- hostile bodies of the endpoints that store what a tenant says ------------------------------

/** A schema nested `depth` levels through `properties`. */
function nested(depth) {
  let schema = { type: 'string' };
  for (let i = 0; i < depth; i++) schema = { type: 'object', properties: { a: schema } };
  return schema;
}

/** `events` definitions whose 11 properties each have a pattern that backtracking engines choke on. */
function patternPlan(events) {
  const properties = Object.fromEntries(
    Array.from({ length: 11 }, (_, i) => [`p${i}`, { type: 'string', pattern: '^(a|b|c){1,25}x$' }]),
  );
  return {
    mode: 'enforce',
    events: Object.fromEntries(
      Array.from({ length: events }, (_, i) => [`E${i}`, { payload: { type: 'object', properties } }]),
    ),
  };
}

const HOSTILE_PLANS = [
  { mode: 'enforce', events: { Robust: { payload: { $ref: '#' } } } },
  {
    mode: 'flag',
    events: {
      Robust: {
        payload: { $defs: { a: { $ref: '#/$defs/b' }, b: { $ref: '#/$defs/a' } }, $ref: '#/$defs/a' },
      },
    },
  },
  { mode: 'flag', events: { Robust: { payload: { $ref: 'https://example.invalid/schema.json' } } } },
  { mode: 'flag', events: { Robust: { payload: nested(40) } } },
  { mode: 'flag', events: { Robust: { payload: nested(1500) } } },
  { mode: 'flag', events: { Robust: { description: 'nul\u0000inside' } } },
  { mode: 'flag', events: { 'Nul\u0000name': {} } },
  { mode: 'flag', events: { Robust: { payload: { properties: { 'k\u0000ey': { type: 'string' } } } } } },
  { mode: 'flag', events: { Robust: { payload: { type: 'string', pattern: 'a'.repeat(5000) } } } },
  { mode: 'flag', events: { Robust: { payload: { type: 'string', pattern: '(a)\\1' } } } },
  patternPlan(20),
];

/** Hostile bodies by operation (`METHOD route`), mixed in with the schema's own. */
const HOSTILE_BODIES = {
  // Events of the names the hostile plans define, so that a stored plan is applied to them.
  'POST /api/ingest': [
    JSON.stringify({
      events: [
        { eventName: 'Robust', payload: { a: 'x' } },
        { eventName: 'E0', payload: { p0: 'ab'.repeat(30) } },
      ],
    }),
  ],
  'PUT /api/v1/plan': HOSTILE_PLANS.map((plan) => JSON.stringify(plan)),
  'POST /api/v1/plan/check': HOSTILE_PLANS.map((plan) =>
    JSON.stringify({ events: [{ eventName: 'Robust', payload: { a: 'x' } }], plan }),
  ),
  'POST /api/v1/deletions': ['a\u0000b', 'line\nbreak', '\u0085', '\ud800'].map((id) =>
    JSON.stringify({ appId: '__app__', anonymousUserIds: [id] }),
  ),
  'POST /api/v1/quarantine/replay': ['a\u0000b', '\u0001', ''].map((eventName) =>
    JSON.stringify({ eventName }),
  ),
  // The SDK formats: messages of every shape the mapping meets, and some it must refuse.
  'POST /api/segment/v1/{endpoint}': [
    JSON.stringify({
      batch: [
        {
          type: 'track',
          event: 'Robust',
          userId: 'a\u0000b',
          properties: { a: { b: { c: { d: { e: { f: 1 } } } } } },
        },
        { type: 'page', name: 7, anonymousId: ['x'], timestamp: '+275760-09-13T00:00:00.001Z' },
        { type: 'screen', context: { os: { name: { n: 1 } }, app: { build: 1e308 } }, messageId: '\ud800' },
        { type: 'identify', traits: { email: 'ann@example.com' } },
        { type: '__proto__' },
        null,
      ],
      sentAt: 'not a date',
      context: '__proto__',
    }),
    JSON.stringify({
      batch: Array.from({ length: 3 }, () => ({ type: 'track', event: 'E0', userId: 2 ** 70 })),
    }),
  ],
  'POST /api/posthog/batch': [
    JSON.stringify({
      batch: [
        {
          event: 'Robust',
          distinct_id: { id: 1 },
          properties: { $set: { a: 1 }, token: 'x', nested: { a: [1] } },
        },
        { event: '$identify', distinct_id: 'a\u0000b' },
        { event: 123, uuid: 'u'.repeat(500), timestamp: -1 },
        'not an event',
      ],
      sent_at: '__huge__',
    }).replace('"__huge__"', '1e400'),
  ],
};

/**
 * The hostile plans in turn, each stored (If-Match: *) and then applied: an ingest batch and a
 * dry run of its events, in this order, so that a plan that compiles but breaks the validator at
 * run time is met by the events it applies to. Sent before the generated cases.
 */
export function hostileSequence(tenant) {
  const api = { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' };
  const ingest = { authorization: `Bearer ${tenant.ingestKey}`, 'content-type': 'application/json' };
  const q = `appId=${tenant.appId}`;
  return HOSTILE_PLANS.flatMap((plan) => [
    {
      method: 'PUT',
      path: `/api/v1/plan?${q}`,
      headers: { ...api, 'if-match': '*' },
      body: JSON.stringify(plan),
    },
    ...HOSTILE_BODIES['POST /api/ingest'].map((body) => ({
      method: 'POST',
      path: '/api/ingest',
      headers: ingest,
      body,
    })),
    {
      method: 'POST',
      path: `/api/v1/plan/check?${q}`,
      headers: api,
      body: JSON.stringify({ events: [{ eventName: 'Robust', payload: { a: 'x' } }] }),
    },
  ]);
}

// ---- values from the schema -------------------------------------------------------------------

function resolve(doc, schema) {
  let s = schema ?? {};
  for (let i = 0; i < 10 && s.$ref; i++) {
    const parts = s.$ref.replace(/^#\//, '').split('/');
    s = parts.reduce((node, key) => node?.[key], doc) ?? {};
  }
  return s;
}

function typesOf(schema) {
  if (Array.isArray(schema.type)) return schema.type;
  if (schema.type) return [schema.type];
  if (schema.properties) return ['object'];
  return [];
}

/** A value that follows `schema`, as far as the schema says. */
function fromSchema(doc, input, depth = 0) {
  const schema = resolve(doc, input);
  if (schema.enum) return fc.constantFrom(...schema.enum);
  const alternatives = schema.oneOf ?? schema.anyOf;
  if (alternatives) return fc.oneof(...alternatives.map((s) => fromSchema(doc, s, depth + 1)));
  const arbs = typesOf(schema).map((type) => {
    switch (type) {
      case 'string':
        if (schema.format === 'uuid') return fc.uuid();
        if (schema.format === 'date')
          return fc.date({ noInvalidDate: true }).map((d) => d.toISOString().slice(0, 10));
        if (schema.format === 'date-time')
          return fc.date({ noInvalidDate: true }).map((d) => d.toISOString());
        return fc.string({
          minLength: Math.min(schema.minLength ?? 0, 5),
          maxLength: Math.min(schema.maxLength ?? 40, 60),
        });
      case 'integer':
        return fc.integer({
          min: Math.max(schema.minimum ?? -1e9, Number.MIN_SAFE_INTEGER),
          max: Math.min(schema.maximum ?? 2e12, Number.MAX_SAFE_INTEGER),
        });
      case 'number':
        return fc.double({ noNaN: true, noDefaultInfinity: true });
      case 'boolean':
        return fc.boolean();
      case 'null':
        return fc.constant(null);
      case 'array':
        return depth > 4
          ? fc.constant([])
          : fc.array(fromSchema(doc, schema.items, depth + 1), {
              minLength: Math.min(schema.minItems ?? 0, 3),
              maxLength: Math.min(schema.maxItems ?? 5, 12),
            });
      case 'object': {
        const props = Object.entries(schema.properties ?? {});
        if (props.length === 0 || depth > 4) {
          const value =
            schema.additionalProperties && typeof schema.additionalProperties === 'object'
              ? fromSchema(doc, schema.additionalProperties, depth + 1)
              : anyValue;
          return fc.dictionary(fc.string({ maxLength: 12 }), value, { maxKeys: 6 });
        }
        const shape = Object.fromEntries(props.map(([name, s]) => [name, fromSchema(doc, s, depth + 1)]));
        return fc.record(shape, { requiredKeys: schema.required ?? [] });
      }
      default:
        return anyValue;
    }
  });
  return arbs.length ? fc.oneof(...arbs) : anyValue;
}

/** Mostly schema-true values; now and then something hostile in their place. */
function mutated(doc, schema, depth = 0) {
  const resolved = resolve(doc, schema);
  const base =
    typesOf(resolved).includes('object') && resolved.properties && depth < 3
      ? fc
          .record(
            Object.fromEntries(
              Object.entries(resolved.properties).map(([k, s]) => [k, mutated(doc, s, depth + 1)]),
            ),
            { requiredKeys: resolved.required ?? [] },
          )
          .chain((obj) =>
            fc
              .option(fc.tuple(fc.oneof(fc.string({ maxLength: 12 }), nastyString), anyValue), { freq: 4 })
              .map((extra) => (extra ? { ...obj, [extra[0]]: extra[1] } : obj)),
          )
      : typesOf(resolved).includes('array') && depth < 3
        ? fc.array(mutated(doc, resolved.items, depth + 1), { minLength: 1, maxLength: 12 })
        : fromSchema(doc, resolved, depth);
  return fc.oneof({ weight: 8, arbitrary: base }, { weight: 1, arbitrary: anyValue });
}

/** Serializes a generated value, putting raw JSON texts where their tokens are. */
function toJson(value) {
  return JSON.stringify(value).replace(/"__raw_json_(\d+)__"/g, (_, i) => RAW_JSON[Number(i)]);
}

/** A query value as text: from the schema, or hostile. */
function queryValue(doc, schema) {
  return fc.oneof(
    {
      weight: 6,
      arbitrary: fromSchema(doc, schema).map((v) =>
        (typeof v === 'string' ? v : JSON.stringify(v)).slice(0, 400),
      ),
    },
    { weight: 2, arbitrary: extremeDate },
    // Short enough that the URL stays under Node's 16 KiB header limit (a 431 from Node itself).
    { weight: 1, arbitrary: nastyString.map((v) => v.slice(0, 400)) },
    { weight: 1, arbitrary: hugeNumber.map(String) },
    {
      weight: 1,
      arbitrary: fc.constantFrom('1e309', '99999999999999999999', '-1', '0x10', ' 10', 'NaN', '1.5'),
    },
  );
}

const RAW_QUERY = fc.constantFrom(...RAW_QUERY_FRAGMENTS);

const takesIfMatch = (op) => (op.parameters ?? []).some((p) => p.in === 'header' && p.name === 'If-Match');

/**
 * One generated request per call of the arbitrary: `{ method, path, query, headers, body }`, for
 * every operation of the document.
 */
export function requestArbitrary(doc, tenant) {
  const operations = [];
  for (const [route, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) operations.push({ route, method, op });
  }
  const keys = [tenant.ingestKey, tenant.apiKey, 'tly_api_' + 'A'.repeat(40), 'tly_live_x', ''];
  return fc.oneof(
    ...operations.map(({ route, method, op }) => {
      const scheme = Object.keys(op.security?.[0] ?? {})[0];
      const rightKey =
        scheme === 'ingestKey' || scheme === 'segmentWriteKey'
          ? tenant.ingestKey
          : scheme === 'apiKey'
            ? tenant.apiKey
            : null;
      // Segment's SDKs send the key as HTTP Basic user name; every other key goes as Bearer.
      const rightAuth =
        rightKey === null
          ? []
          : scheme === 'segmentWriteKey'
            ? [`Basic ${Buffer.from(`${rightKey}:`).toString('base64')}`]
            : [`Bearer ${rightKey}`];
      // Path parameters get values from their schema (an enum's members, a UUID).
      const pathParams = (op.parameters ?? []).filter((p) => p.in === 'path');
      const pathArb = fc
        .tuple(...pathParams.map((p) => fromSchema(doc, p.schema)))
        .map((values) =>
          pathParams.reduce(
            (r, p, i) => r.replace(`{${p.name}}`, encodeURIComponent(String(values[i]))),
            route,
          ),
        );
      const params = (op.parameters ?? []).filter((p) => p.in === 'query');
      const paramArb = fc.array(
        fc.oneof(
          ...params.map((p) =>
            fc.tuple(
              fc.constant(p.name),
              p.name === 'appId'
                ? fc.oneof(
                    { weight: 6, arbitrary: fc.constant(tenant.appId) },
                    { weight: 1, arbitrary: queryValue(doc, p.schema) },
                  )
                : queryValue(doc, p.schema),
              fc.boolean(),
            ),
          ),
          fc.tuple(fc.constantFrom('unknown', 'appId[]', 'limit', 'from'), queryValue(doc, {}), fc.boolean()),
          fc.tuple(fc.constantFrom(...params.map((p) => p.name), 'x'), RAW_QUERY, fc.constant(true)),
        ),
        { maxLength: 6 },
      );
      const bodySchema = op.requestBody?.content?.['application/json']?.schema;
      const hostile = (HOSTILE_BODIES[`${method.toUpperCase()} ${route}`] ?? []).map((b) =>
        b.replace('__app__', tenant.appId),
      );
      const bodyArb = bodySchema
        ? fc.oneof(
            ...(hostile.length ? [{ weight: 8, arbitrary: fc.constantFrom(...hostile) }] : []),
            { weight: 10, arbitrary: mutated(doc, bodySchema).map(toJson) },
            { weight: 1, arbitrary: anyValue.map(toJson) },
            {
              weight: 1,
              arbitrary: fc
                .tuple(mutated(doc, bodySchema).map(toJson), fc.nat())
                .map(([text, cut]) => text.slice(0, cut % (text.length + 1))),
            },
          )
        : fc.constant(undefined);
      const authArb = fc.oneof(
        { weight: 12, arbitrary: fc.constant(rightAuth) },
        { weight: 1, arbitrary: fc.constantFrom(...keys).map((k) => [`Bearer ${k}`]) },
        { weight: 1, arbitrary: fc.constant([]) },
        {
          weight: 1,
          arbitrary: fc.constantFrom(...keys).map((k) => [`Bearer ${rightKey ?? k}`, `Bearer ${k}`]),
        },
      );
      return fc
        .record({
          where: pathArb,
          params: paramArb,
          body: bodyArb,
          auth: authArb,
          gzip: fc.boolean(),
          ifMatch: takesIfMatch(op)
            ? fc.constantFrom('*', '*', '*', '"0"', '"999"', 'W/"x"', undefined)
            : fc.constant(undefined),
          contentType: fc.oneof(
            { weight: 10, arbitrary: fc.constant('application/json') },
            {
              weight: 1,
              arbitrary: fc.constantFrom(
                'text/plain',
                'application/json; charset=latin1',
                'application/x-www-form-urlencoded',
              ),
            },
          ),
        })
        .map(({ where, params, body, auth, gzip, ifMatch, contentType }) => {
          const query = params
            // Sent raw (possibly bad percent-encoding) when printable ASCII; encoded otherwise.
            .map(
              ([name, v, raw]) =>
                `${percentEncode(name)}=${raw && /^[\x21-\x7e]*$/.test(v) ? v : percentEncode(v)}`,
            )
            .join('&');
          const headers = {};
          if (auth.length) headers.authorization = auth.length === 1 ? auth[0] : auth;
          if (gzip) headers['accept-encoding'] = 'gzip';
          if (ifMatch !== undefined) headers['if-match'] = ifMatch;
          if (body !== undefined) headers['content-type'] = contentType;
          return { method: method.toUpperCase(), path: query ? `${where}?${query}` : where, headers, body };
        });
    }),
  );
}
