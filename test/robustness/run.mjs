// Robustness as a CI test: requests generated from docs/openapi.json (test/robustness/requests.mjs)
// sent over HTTP to a real server on a cluster of its own. It passes when no answer is a 5xx and
// every 4xx is problem+json with a code.
//
//   npm run test:robustness                                      (5,000 cases; CI)
//   node test/robustness/run.mjs [--cases 5000] [--seed 1] [--from 0]
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { makeCliTenant } from '../support/cli-tenant.js';
import { hostileSequence, OPENAPI_FILE, requestArbitrary } from './requests.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

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
  /** Sends one request and files its answer; a kept-alive connection closed under it is retried once. */
  const sendAndFile = async (req) => {
    let res = await send(agent, baseUrl, req);
    // A kept-alive connection the server closed as the request left (its keep-alive timeout on a
    // starved machine) is a client-side race, not an answer: retry once on a new connection.
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
  };
  // The hostile plans first, each stored and then applied, one request at a time.
  if (from === 0) for (const req of hostileSequence(tenant)) await sendAndFile(req);
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
        while (next < requests.length) await sendAndFile(requests[next++]);
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

// Every scope, so that the bodies of plans, deletions and the quarantine replay are reached too.
const ALL_SCOPES = [
  'events:read',
  'rollups:read',
  'events:export',
  'privacy:write',
  'plans:read',
  'plans:write',
];

/** An app with an ingest key and an API key of every scope, made with the admin CLI as an operator would. */
export function makeRobustnessTenant(cli, dist, url) {
  return makeCliTenant((args) => cli(dist, url, args), `robustness-${Date.now().toString(36)}`, ALL_SCOPES);
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
  const { cli, freePort, startServer } = await import('../../bench/lib/processes.mjs');
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
