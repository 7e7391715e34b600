import { promises as fs } from 'node:fs';
import * as path from 'node:path';

/** Reports bytes copied so far (a progress line on a terminal). */
export type Progress = (done: number, total: number) => void;

/**
 * Folders of a data directory whose contents a base backup leaves out (PostgreSQL's
 * "Making a Base Backup Using the Low Level API"): rebuilt at start, or, for pg_wal, copied
 * separately once the backup has stopped. The folders themselves are kept, empty.
 */
const EMPTY_FOLDERS = new Set([
  'pg_wal',
  'pg_replslot',
  'pg_dynshmem',
  'pg_notify',
  'pg_serial',
  'pg_snapshots',
  'pg_stat_tmp',
  'pg_subtrans',
]);
const SKIPPED_FILES = new Set(['postmaster.pid', 'postmaster.opts', 'backup_label', 'tablespace_map']);

const missing = (err: unknown) => (err as NodeJS.ErrnoException).code === 'ENOENT';

/** Bytes read and written at a time: small enough that a pause after each keeps the disk shared. */
const CHUNK = 1_048_576;

/**
 * Where a copy reports what it copied, and how it leaves the machine to the service: after each
 * chunk it pauses for `pausePercent` of the time the chunk took (0: no pause).
 */
export interface CopyPace {
  add(bytes: number): void;
  pausePercent: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Copies one file in chunks, pausing after each; a file that vanished is skipped. */
async function copyFilePaced(source: string, target: string, pace: CopyPace): Promise<void> {
  let from: fs.FileHandle;
  try {
    from = await fs.open(source, 'r');
  } catch (err) {
    if (missing(err)) return;
    throw err;
  }
  const to = await fs.open(target, 'w', 0o600);
  const buffer = Buffer.allocUnsafe(CHUNK);
  try {
    for (let position = 0; ;) {
      const started = performance.now();
      const { bytesRead } = await from.read(buffer, 0, CHUNK, position);
      if (bytesRead === 0) break;
      await to.write(buffer, 0, bytesRead, position);
      position += bytesRead;
      pace.add(bytesRead);
      if (pace.pausePercent > 0) await sleep(((performance.now() - started) * pace.pausePercent) / 100);
    }
  } finally {
    await from.close();
    await to.close();
  }
}

/** Total size of the files under `dir` (files that vanish meanwhile count nothing). */
export async function treeBytes(dir: string): Promise<number> {
  let total = 0;
  const entries = await fs.readdir(dir, { withFileTypes: true }).catch((err: unknown) => {
    if (missing(err)) return [];
    throw err;
  });
  for (const e of entries) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) total += await treeBytes(p);
    else if (e.isFile())
      total += await fs.stat(p).then(
        (s) => s.size,
        () => 0,
      );
  }
  return total;
}

/**
 * Copies a running cluster's data directory, file by file. A file dropped while the copy runs
 * (a table dropped, a temporary file) is simply absent: the WAL replayed at restore accounts for
 * it, as it does for the pages that change while they are read.
 */
export async function copyDataDirectory(from: string, to: string, pace: CopyPace, top = true): Promise<void> {
  await fs.mkdir(to, { recursive: true, mode: 0o700 });
  const entries = await fs.readdir(from, { withFileTypes: true }).catch((err: unknown) => {
    if (missing(err)) return [];
    throw err;
  });
  for (const e of entries) {
    const source = path.join(from, e.name);
    const target = path.join(to, e.name);
    if (e.isDirectory()) {
      if (top && EMPTY_FOLDERS.has(e.name)) await fs.mkdir(target, { mode: 0o700 });
      else await copyDataDirectory(source, target, pace, false);
    } else if (e.isFile()) {
      if (top && SKIPPED_FILES.has(e.name)) continue;
      await copyFilePaced(source, target, pace);
    }
  }
}

/** Copies the WAL segments `first` to `last` (file names of one timeline) into `to`. */
export async function copyWalSegments(
  walDir: string,
  to: string,
  first: string,
  last: string,
): Promise<number> {
  await fs.mkdir(path.join(to, 'archive_status'), { recursive: true, mode: 0o700 });
  let bytes = 0;
  const names = (await fs.readdir(walDir)).filter((n) => /^[0-9A-F]{24}$/.test(n) && n >= first && n <= last);
  for (const name of names.sort()) {
    await fs.copyFile(path.join(walDir, name), path.join(to, name));
    bytes += (await fs.stat(path.join(to, name))).size;
  }
  return bytes;
}

/** Makes `uid`:`gid` own everything under `dir`, `dir` included. */
export async function chownTree(dir: string, uid: number, gid: number): Promise<void> {
  await fs.chown(dir, uid, gid);
  for (const e of await fs.readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) await chownTree(p, uid, gid);
    else await fs.chown(p, uid, gid);
  }
}

/** Deletes what `dir` holds, keeping `dir` itself (its owner and mode). */
export async function emptyFolder(dir: string): Promise<void> {
  for (const name of await fs.readdir(dir))
    await fs.rm(path.join(dir, name), { recursive: true, force: true });
}

/** Copies a folder tree as it is (a backup's data into a new cluster). */
export async function copyTree(from: string, to: string): Promise<void> {
  await fs.cp(from, to, { recursive: true, verbatimSymlinks: true });
}
