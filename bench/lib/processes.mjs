/* global fetch */
// Child processes of the benchmark: the built server, the admin CLI, the bare HTTP server.
// Everything listens on 127.0.0.1 and is stopped before the run ends.
import { spawn, execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { freePort, sleep } from '../../test/support/harness.js';

export { freePort };

const execFileAsync = promisify(execFile);

/** Resident and peak resident memory of a process, in bytes, from /proc (Linux). */
export function memoryOf(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (name) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
    return { rss: kb('VmRSS') * 1024, hwm: kb('VmHWM') * 1024 };
  } catch {
    return { rss: NaN, hwm: NaN };
  }
}

const TICKS_PER_SECOND = 100;

/**
 * A process's parent, the CPU seconds (user + system) it has used, and those of its children it
 * has waited for (reaped), from /proc (Linux); null once gone.
 */
function statOf(pid) {
  try {
    // Fields after the command name, which may itself hold spaces: ppid is field 4, utime 14,
    // stime 15, cutime 16, cstime 17.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return {
      ppid: Number(fields[1]),
      cpuSeconds: (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND,
      reapedCpuSeconds: (Number(fields[13]) + Number(fields[14])) / TICKS_PER_SECOND,
    };
  } catch {
    return null;
  }
}

/** CPU seconds (user + system) a process has used so far; 0 once it is gone. */
export function cpuSecondsOf(pid) {
  return statOf(pid)?.cpuSeconds ?? 0;
}

/**
 * CPU seconds a process has used so far, to the nanosecond: the sum over its threads of the
 * scheduler's run time (/proc/<pid>/task/<tid>/schedstat, Linux). /proc/<pid>/stat counts in
 * 10 ms ticks, which is 0.25 µs per event of a 40,000-event round; this is exact. A thread that
 * has exited takes its count with it (Node's threads live as long as the process). Falls back
 * to the tick count where schedstat is missing; 0 once the process is gone.
 */
export function preciseCpuSecondsOf(pid) {
  let tasks;
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return 0;
  }
  let ns = 0;
  for (const tid of tasks) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch (err) {
      if (err.code === 'ENOENT' && tid === String(pid)) return cpuSecondsOf(pid);
      // A thread that ended between the listing and the read.
    }
  }
  return ns / 1e9;
}

/** The postmaster of the cluster in `dataDir` and the processes it started; null when it is not running. */
export function clusterProcesses(dataDir) {
  let postmaster;
  try {
    postmaster = Number(readFileSync(`${dataDir}/postmaster.pid`, 'utf8').split('\n')[0]);
  } catch {
    return null;
  }
  const children = [];
  for (const entry of readdirSync('/proc')) {
    if (/^\d+$/.test(entry) && statOf(entry)?.ppid === postmaster) children.push(Number(entry));
  }
  return { postmaster, children };
}

/**
 * CPU seconds used so far by a PostgreSQL cluster: the postmaster of `dataDir` and every process
 * it started (backends, WAL writer, checkpointer). A backend that exits takes its count with it,
 * so measure across spans in which the connections stay open.
 */
export function clusterCpuSeconds(dataDir) {
  const cluster = clusterProcesses(dataDir);
  if (!cluster) return NaN;
  return [cluster.postmaster, ...cluster.children].reduce((total, pid) => total + cpuSecondsOf(pid), 0);
}

/**
 * As clusterCpuSeconds, with the CPU of the processes the postmaster has started and reaped
 * since (its cutime and cstime): backends of connections closed within the span count too.
 */
export function clusterCpuSecondsWithExited(dataDir) {
  const cluster = clusterProcesses(dataDir);
  const postmaster = cluster && statOf(cluster.postmaster);
  if (!postmaster) return NaN;
  const children = cluster.children.reduce((total, pid) => total + cpuSecondsOf(pid), 0);
  return postmaster.cpuSeconds + postmaster.reapedCpuSeconds + children;
}

/** Keeps the last lines of a child's output, to explain a failure. */
function tail(stream, lines) {
  let buffer = '';
  stream.setEncoding('utf8');
  stream.on('data', (d) => {
    buffer += d;
    const parts = buffer.split('\n');
    buffer = parts.pop();
    lines.push(...parts);
    if (lines.length > 50) lines.splice(0, lines.length - 50);
  });
}

async function waitForHttp(url, child, output, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      throw new Error(`process exited with ${child.exitCode} before it was ready:\n${output.join('\n')}`);
    }
    try {
      const res = await fetch(url);
      if (res.ok) return;
    } catch {
      /* not listening yet */
    }
    await sleep(100);
  }
  throw new Error(`${url} not ready after ${timeoutMs} ms:\n${output.join('\n')}`);
}

function handle(child, output, baseUrl) {
  let peakRss = 0;
  const sampler = setInterval(() => {
    const { rss } = memoryOf(child.pid);
    if (rss > peakRss) peakRss = rss;
  }, 100);
  sampler.unref();
  return {
    pid: child.pid,
    baseUrl,
    output,
    memory() {
      const { rss, hwm } = memoryOf(child.pid);
      return { rss, hwm, sampledPeak: Math.max(peakRss, rss || 0) };
    },
    async stop() {
      clearInterval(sampler);
      if (child.exitCode !== null) return child.exitCode;
      const exited = new Promise((r) => child.once('exit', (code) => r(code)));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

// The V8 heap cap, the old generation's starting size and the glibc arena cap that `npm start`
// gives the server (package.json `config.heapMb`, `config.heapStartMb`, `config.mallocArenaMax`).
const {
  heapMb: HEAP_MB,
  heapStartMb: HEAP_START_MB,
  mallocArenaMax: MALLOC_ARENA_MAX,
} = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).config;

/** Starts `node dist/src/main.js` as `npm start` does (heap and arena caps), against `databaseUrl`, and waits for /healthz. */
export async function startServer({ dist, databaseUrl, env = {}, nodeArgs = [] }) {
  const port = await freePort();
  const args = [
    `--max-old-space-size=${HEAP_MB}`,
    `--initial-old-space-size=${HEAP_START_MB}`,
    ...nodeArgs,
    `${dist}/src/main.js`,
  ];
  const child = spawn(process.execPath, args, {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      MALLOC_ARENA_MAX,
      DATABASE_URL: databaseUrl,
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'warn',
      ROLLUPS_ENABLED: 'false',
      // The benchmark measures capacity, not the limiter: raise every limit far out of reach.
      INGEST_RATE_REQUESTS: '10000000',
      INGEST_RATE_EVENTS: '1000000000',
      READ_RATE_REQUESTS: '10000000',
      READ_MAX_CONCURRENT_PER_KEY: '10000',
      READ_TIME_MS_PER_SECOND: '1000000',
      INGEST_CPU_MS_PER_SECOND: '1000000',
      AUTH_FAILURE_LIMIT: '10000000',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = [];
  tail(child.stdout, output);
  tail(child.stderr, output);
  const baseUrl = `http://127.0.0.1:${port}`;
  try {
    await waitForHttp(`${baseUrl}/healthz`, child, output, 90_000);
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  return handle(child, output, baseUrl);
}

/** Starts the bare node:http server used as the HTTP ceiling. */
export async function startBareServer(script) {
  const port = await freePort();
  const child = spawn(process.execPath, [script, String(port)], { stdio: ['ignore', 'pipe', 'pipe'] });
  const output = [];
  tail(child.stdout, output);
  tail(child.stderr, output);
  const baseUrl = `http://127.0.0.1:${port}`;
  await waitForHttp(`${baseUrl}/healthz`, child, output, 10_000);
  return handle(child, output, baseUrl);
}

/** Runs one admin CLI command with --json and returns its parsed output. */
export async function cli(dist, databaseUrl, args) {
  try {
    const { stdout } = await execFileAsync(process.execPath, [`${dist}/src/cli/main.js`, ...args, '--json'], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' },
      timeout: 600_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    return JSON.parse(stdout);
  } catch (err) {
    const detail = err.stderr?.trim() || err.message;
    throw new Error(`tally ${args.join(' ')} failed: ${detail}`);
  }
}

/** An app and its ingest key through the admin CLI, the way an operator makes them. */
export async function makeTenant(dist, url, name) {
  const app = await cli(dist, url, ['apps', 'create', '--name', name]);
  const ingest = await cli(dist, url, ['keys', 'create-ingest', '--app', app.id]);
  return { appId: app.id, ingestKey: ingest.key };
}

export function ingestHeaders(key, gzip = false) {
  return {
    authorization: `Bearer ${key}`,
    'content-type': 'application/json',
    ...(gzip ? { 'content-encoding': 'gzip' } : {}),
  };
}
