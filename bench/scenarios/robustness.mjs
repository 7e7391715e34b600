// Robustness: requests generated from the OpenAPI document (docs/openapi.json) with fast-check,
// sent over HTTP to a real server. Every operation gets bodies and query strings that follow its
// schema, mixed with hostile values: deep nesting, extreme and offset dates, huge numbers, odd
// Unicode, control characters, wrong types, raw JSON text and bad percent-encoding. The
// invariant: no answer is a 5xx, and every 4xx is problem+json with a code.
//
//   node bench/scenarios/robustness.mjs [--cases 5000] [--seed 1]   (own cluster and server; CI)
//   npm run bench -- --robustness                                   (100,000 cases, into latest.json)
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';

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

/** Percent-encodes UTF-8 (a lone surrogate becomes U+FFFD, as in a browser). */
function percentEncode(v) {
  let out = '';
  for (const byte of Buffer.from(v, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-_.~]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

const RAW_QUERY = fc.constantFrom(
  '%',
  '%zz',
  '%ff%fe',
  '%c3%28',
  '%00',
  '%ed%a0%80',
  'a%2',
  '+',
  '[]=1',
  '%2B01:00',
);

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
      const rightKey = scheme === 'ingestKey' ? tenant.ingestKey : scheme === 'apiKey' ? tenant.apiKey : null;
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
      const bodyArb = bodySchema
        ? fc.oneof(
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
        { weight: 12, arbitrary: fc.constant(rightKey === null ? [] : [`Bearer ${rightKey}`]) },
        { weight: 1, arbitrary: fc.constantFrom(...keys).map((k) => [`Bearer ${k}`]) },
        { weight: 1, arbitrary: fc.constant([]) },
        {
          weight: 1,
          arbitrary: fc.constantFrom(...keys).map((k) => [`Bearer ${rightKey ?? k}`, `Bearer ${k}`]),
        },
      );
      return fc
        .record({
          params: paramArb,
          body: bodyArb,
          auth: authArb,
          gzip: fc.boolean(),
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
        .map(({ params, body, auth, gzip, contentType }) => {
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
          if (body !== undefined) headers['content-type'] = contentType;
          return { method: method.toUpperCase(), path: query ? `${route}?${query}` : route, headers, body };
        });
    }),
  );
}

// ---- sending ----------------------------------------------------------------------------------

function send(agent, baseUrl, req) {
  return new Promise((resolve) => {
    const url = new URL(baseUrl);
    const headers = { ...req.headers };
    const body = req.body === undefined ? undefined : Buffer.from(req.body, 'utf8');
    if (body) headers['content-length'] = String(body.length);
    const r = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: req.method,
        path: req.path,
        headers,
        agent,
        timeout: 30_000,
      },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode,
            type: res.headers['content-type'] ?? '',
            encoding: res.headers['content-encoding'],
            body: Buffer.concat(chunks),
          }),
        );
        res.on('error', (err) => resolve({ status: 0, error: err.message }));
      },
    );
    r.on('timeout', () => r.destroy(new Error('timeout')));
    r.on('error', (err) => resolve({ status: 0, error: err.message }));
    r.end(body);
  });
}

/** A 4xx must be problem+json with a code; compressed answers are only checked for their type. */
function malformedProblem(res) {
  if (res.status < 400 || res.status >= 500) return false;
  if (!/^application\/problem\+json/.test(res.type)) return true;
  if (res.encoding) return false;
  try {
    return typeof JSON.parse(res.body.toString('utf8')).code !== 'string';
  } catch {
    return true;
  }
}

/**
 * Sends `cases` generated requests to `baseUrl`, `concurrency` at a time. Returns the figures;
 * `serverErrors` must be 0.
 */
export async function runRobustness({
  baseUrl,
  tenant,
  cases,
  seed = 1,
  from = 0,
  concurrency = 8,
  log = () => undefined,
}) {
  const doc = JSON.parse(fs.readFileSync(OPENAPI_FILE, 'utf8'));
  const arbitrary = requestArbitrary(doc, tenant);
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const byStatus = {};
  const byOperation = {};
  const failures = [];
  let serverErrors = 0;
  let transportErrors = 0;
  let readinessUnavailable = 0;
  let malformed = 0;
  const started = process.hrtime.bigint();
  const CHUNK = 1000;
  // `from` skips whole chunks, to replay the cases of a long run from a given point.
  for (let done = from; done < from + cases; done += CHUNK) {
    const requests = fc.sample(arbitrary, {
      numRuns: Math.min(CHUNK, from + cases - done),
      seed: seed * 1_000_003 + done,
    });
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < requests.length) {
          const req = requests[next++];
          let res = await send(agent, baseUrl, req);
          // A kept-alive connection the server closed as the request left (its keep-alive
          // timeout on a starved machine) is a client-side race, not an answer: retry once
          // on a new connection.
          if (res.status === 0) res = await send(false, baseUrl, req);
          byStatus[res.status] = (byStatus[res.status] ?? 0) + 1;
          const op = `${req.method} ${req.path.split('?')[0]}`;
          byOperation[op] = (byOperation[op] ?? 0) + 1;
          // /readyz answers 503 by design while its database check is slower than its bound.
          const notReady = res.status === 503 && req.path.startsWith('/readyz');
          if (notReady) readinessUnavailable++;
          const bad = (res.status >= 500 && !notReady) || res.status === 0 || malformedProblem(res);
          if (res.status >= 500 && !notReady) serverErrors++;
          else if (res.status === 0) transportErrors++;
          else if (bad) malformed++;
          if (bad && failures.length < 20) {
            log(
              `robustness: ${res.status || res.error} for ${req.method} ${req.path.slice(0, 200)}: ${res.body?.toString('utf8').slice(0, 300)}`,
            );
            failures.push({
              status: res.status,
              error: res.error,
              method: req.method,
              path: req.path.slice(0, 300),
              headers: req.headers,
              body: req.body?.slice(0, 300),
              answer: res.body?.toString('utf8').slice(0, 300),
            });
          }
        }
      }),
    );
    if ((done + CHUNK) % 10_000 === 0) log(`robustness: ${done + CHUNK} cases, ${serverErrors} 5xx`);
  }
  agent.destroy();
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return {
    cases,
    seed,
    concurrency,
    seconds,
    casesPerSec: cases / seconds,
    serverErrors,
    readinessUnavailable,
    transportErrors,
    malformedProblems: malformed,
    byStatus,
    byOperation,
    failures,
  };
}

/** An app with an ingest key and a read key, made with the admin CLI as an operator would. */
export async function makeRobustnessTenant(cli, dist, url) {
  const app = await cli(dist, url, ['apps', 'create', '--name', `robustness-${Date.now().toString(36)}`]);
  const ingest = await cli(dist, url, ['keys', 'create-ingest', '--app', app.id]);
  const api = await cli(dist, url, [
    'keys',
    'create-api',
    '--app',
    app.id,
    '--scope',
    'events:read',
    '--scope',
    'rollups:read',
  ]);
  return { appId: app.id, ingestKey: ingest.key, apiKey: api.key };
}

// ---- standalone (CI) --------------------------------------------------------------------------

async function standalone() {
  const { values } = parseArgs({
    options: {
      cases: { type: 'string', default: '5000' },
      seed: { type: 'string', default: '1' },
      from: { type: 'string', default: '0' },
    },
  });
  const { destroy, ensure, makeTemporaryDir } = await import('../../src/database/embedded-pg.mjs');
  const { cli, freePort, startServer } = await import('../lib/processes.mjs');
  const dist = path.join(ROOT, 'dist');
  const dir = await makeTemporaryDir('robustness');
  let server;
  try {
    const { url } = await ensure(dir, await freePort());
    const tenant = await makeRobustnessTenant(cli, dist, url);
    server = await startServer({ dist, databaseUrl: url });
    const result = await runRobustness({
      baseUrl: server.baseUrl,
      tenant,
      cases: Number(values.cases),
      seed: Number(values.seed),
      from: Number(values.from),
      log: (m) => process.stderr.write(`${m}\n`),
    });
    const { failures, ...figures } = result;
    process.stdout.write(JSON.stringify(figures) + '\n');
    for (const f of failures) process.stdout.write(`FAILED ${JSON.stringify(f)}\n`);
    const ok = result.serverErrors === 0 && result.transportErrors === 0 && result.malformedProblems === 0;
    process.stdout.write(
      `robustness: ${result.cases} cases in ${result.seconds.toFixed(1)} s, ${result.serverErrors} 5xx, ` +
        `${result.transportErrors} transport errors, ${result.malformedProblems} 4xx without a problem code: ${ok ? 'PASS' : 'FAIL'}\n`,
    );
    return ok ? 0 : 1;
  } finally {
    await server?.stop?.();
    await destroy(dir).catch(() => undefined);
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  standalone().then(
    (code) => process.exit(code),
    (err) => {
      process.stderr.write(`robustness failed: ${err instanceof Error ? (err.stack ?? err.message) : err}\n`);
      process.exit(1);
    },
  );
}

/**
 * `npm run bench -- --robustness`: 100,000 cases (5,000 with --quick) against a server on the
 * benchmark's cluster; the figures go into bench/results/latest.json (quick.json) under
 * `robustness`, beside the other figures. Resolves with the exit code.
 */
export async function robustnessMode({ dist, cluster, quick, log, stopCluster, resultsDir }) {
  const { cli, startServer } = await import('../lib/processes.mjs');
  let server;
  let result;
  try {
    const tenant = await makeRobustnessTenant(cli, dist, cluster.url);
    server = await startServer({ dist, databaseUrl: cluster.url });
    result = await runRobustness({ baseUrl: server.baseUrl, tenant, cases: quick ? 5_000 : 100_000, log });
  } finally {
    await server?.stop();
    await stopCluster(cluster.dir).catch(() => undefined);
    if (cluster.temporary) fs.rmSync(cluster.dir, { recursive: true, force: true });
    fs.rmSync(dist, { recursive: true, force: true });
  }
  const file = path.join(resultsDir, quick ? 'quick.json' : 'latest.json');
  const results = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : {};
  results.robustness = { timestamp: new Date().toISOString(), ...result };
  fs.writeFileSync(file, JSON.stringify(results, null, 2) + '\n');
  const ok = result.serverErrors === 0 && result.transportErrors === 0 && result.malformedProblems === 0;
  log(
    `robustness: ${result.cases} cases in ${result.seconds.toFixed(0)} s: ${result.serverErrors} 5xx, ` +
      `${result.transportErrors} transport errors, ${result.malformedProblems} 4xx without a problem code`,
  );
  process.stdout.write(`\nResults: ${path.relative(ROOT, file)} (robustness)\n`);
  return ok ? 0 : 1;
}
