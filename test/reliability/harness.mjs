// Shared pieces of the out-of-process reliability scripts (crash, outage, soak): a private
// embedded PostgreSQL, the admin CLI, the built server as a child process, HTTP with a hard
// deadline, and a small pass/fail ledger. Plain ESM so the scripts run without a compiler.
/* global fetch, AbortSignal */
import fs from 'node:fs/promises';
import { readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { clusterDir, destroy, ensure, makeTemporaryDir, stop } from '../../src/database/embedded-pg.mjs';
import { makeCliTenant } from '../support/cli-tenant.js';
import { freePort, sleep, startNodeProcess } from '../support/harness.js';

export { freePort, sleep };

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SERVER_JS = path.join(ROOT, 'dist/src/main.js');
const CLI_JS = path.join(ROOT, 'dist/src/cli/main.js');
// The erasure ledger of this script's servers and CLI runs: never the checkout's `.data/`, whose
// ledger belongs to the developer's own cluster.
const LEDGER = path.join(os.tmpdir(), `tally-reliability-ledger-${process.pid}.ndjson`);

/** Fails fast with a clear message when `npm run build` has not produced the server. */
export async function assertBuilt() {
  for (const file of [SERVER_JS, CLI_JS]) {
    await fs.access(file).catch(() => {
      throw new Error(`${path.relative(ROOT, file)} is missing: run npm run build first`);
    });
  }
}

/** A PostgreSQL cluster in a temporary folder that only this script uses. */
export async function startDatabase(label) {
  const dir = await makeTemporaryDir(label);
  const port = await freePort();
  const { url } = await ensure(dir, port);
  const pgdata = path.join(await clusterDir(dir), 'pg');
  clusters.add(pgdata);
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  // A stopped database makes idle clients error; the script handles outages itself.
  pool.on('error', () => undefined);
  return {
    dir,
    port,
    url,
    pool,
    stop: () => stop(dir),
    start: () => ensure(dir, port),
    async destroy() {
      await pool.end().catch(() => undefined);
      await destroy(dir).catch(() => undefined);
      clusters.delete(pgdata);
    },
  };
}

/** Runs one admin CLI command with --json and returns its parsed output. */
export function cli(databaseUrl, args) {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [CLI_JS, ...args, '--json'],
      {
        cwd: ROOT,
        env: { ERASURE_LEDGER_PATH: LEDGER, ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' },
        timeout: 60_000,
      },
      (err, stdout, stderr) => {
        if (err) return reject(new Error(`tally ${args.join(' ')} failed: ${stderr.trim() || err.message}`));
        try {
          resolve(JSON.parse(stdout));
        } catch {
          reject(new Error(`tally ${args.join(' ')} printed no JSON: ${stdout.slice(0, 200)}`));
        }
      },
    );
  });
}

/** An app with a live ingest key and an API key (and its id) that has both read scopes. */
export function makeTenant(databaseUrl, name) {
  return makeCliTenant((args) => cli(databaseUrl, args), name);
}

/** Limits high enough that the load of these scripts is never throttled. */
export const UNTHROTTLED = {
  INGEST_RATE_REQUESTS: '10000000',
  INGEST_RATE_EVENTS: '1000000000',
  READ_RATE_REQUESTS: '10000000',
  AUTH_FAILURE_LIMIT: '10000000',
};

// Servers and clusters this process started; none may outlive the script, whatever happens to
// it. pg_ctl starts PostgreSQL detached, in its own session, so an interrupted script (Ctrl-C, a
// CI timeout) used to leave its cluster running: the exit hook asks every cluster still up for
// a fast shutdown, and a signal now exits through that hook.
const children = new Set();
const clusters = new Set();
process.on('exit', () => {
  rmSync(LEDGER, { force: true });
  for (const child of children) child.kill('SIGKILL');
  for (const pgdata of clusters) {
    try {
      const pid = Number(readFileSync(path.join(pgdata, 'postmaster.pid'), 'utf8').split('\n')[0]);
      if (pid > 0) process.kill(pid, 'SIGINT');
    } catch {
      /* not running */
    }
  }
});
for (const [signal, number] of [
  ['SIGINT', 2],
  ['SIGTERM', 15],
  ['SIGHUP', 1],
]) {
  process.once(signal, () => process.exit(128 + number));
}

/**
 * Starts `node dist/src/main.js` and resolves once it listens. `exited` resolves with the exit
 * code or signal; `output()` returns what it printed, for diagnostics.
 */
export async function startServer({ databaseUrl, port, env = {}, startTimeoutMs = 60_000 }) {
  const server = await startNodeProcess(SERVER_JS, {
    cwd: ROOT,
    env: {
      DATABASE_URL: databaseUrl,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      ERASURE_LEDGER_PATH: LEDGER,
      ...UNTHROTTLED,
      ...env,
    },
    timeoutMs: startTimeoutMs,
  });
  const { child } = server;
  children.add(child);
  child.on('exit', () => children.delete(child));
  // The signal that ended it, or its exit code.
  const exited = server.exited.then(({ code, signal }) => signal ?? code);
  return {
    child,
    pid: child.pid,
    base: `http://127.0.0.1:${port}`,
    exited,
    output: server.output,
    isAlive: () => child.exitCode === null && child.signalCode === null,
    async kill(signal = 'SIGKILL') {
      await server.kill(signal);
      return exited;
    },
  };
}

/** Resident set size of a process in bytes (Linux), or null. */
export function rssOf(pid) {
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/**
 * One HTTP exchange with a hard deadline. Never throws: a transport failure or a timeout comes
 * back as `{ error }`, so a caller can treat it like an SDK would (no answer: retry later).
 */
export async function http(base, pathname, { method = 'GET', headers = {}, body, timeoutMs = 10_000 } = {}) {
  const started = performance.now();
  try {
    const res = await fetch(base + pathname, {
      method,
      headers,
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    let json;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return {
      status: res.status,
      headers: res.headers,
      text,
      body: json,
      ms: performance.now() - started,
    };
  } catch (err) {
    const cause = err?.cause?.code ?? err?.name ?? 'error';
    return { error: String(cause), ms: performance.now() - started };
  }
}

export function ingest(base, key, events, timeoutMs) {
  return http(base, '/api/ingest', {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
    body: { events, sentAt: Date.now() },
    timeoutMs,
  });
}

/** How many rows of the events table hold each of `eventIds`, for one app. */
export async function storedCounts(pool, appId, eventIds) {
  const { rows } = await pool.query(
    `SELECT event_id, count(*)::int AS n FROM events
      WHERE app_id = $1 AND event_id = ANY($2::text[]) GROUP BY event_id`,
    [appId, eventIds],
  );
  const counts = new Map(eventIds.map((id) => [id, 0]));
  for (const row of rows) counts.set(row.event_id, row.n);
  return counts;
}

/** Named checks; prints a line per failure and a `N passed, M failed` line at the end. */
export class Ledger {
  passed = 0;
  failed = 0;
  failures = [];

  check(name, ok, detail = '') {
    if (ok) {
      this.passed++;
    } else {
      this.failed++;
      this.failures.push(name);
      if (this.failed === 40) process.stdout.write('FAIL … further failures are counted, not printed\n');
      if (this.failed < 40) process.stdout.write(`FAIL ${name}${detail ? `: ${detail}` : ''}\n`);
    }
    return ok;
  }

  finish(summary) {
    process.stdout.write(`${summary}\n`);
    process.stdout.write(`${this.passed} passed, ${this.failed} failed\n`);
    return this.failed === 0 ? 0 : 1;
  }
}

export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

/**
 * Runs a reliability script's `main` (which resolves with its exit code) and exits with it. An
 * exception aborts the run as one failed check, in the "N passed, M failed" line CI reads.
 */
export function runScript(name, main) {
  main().then(
    (code) => process.exit(code),
    (err) => {
      process.stderr.write(`${name} aborted: ${err instanceof Error ? (err.stack ?? err.message) : err}\n`);
      process.stdout.write('0 passed, 1 failed\n');
      process.exit(1);
    },
  );
}
