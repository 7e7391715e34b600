import { execFile, spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { connectClient } from '@app/database/pg-client';
import { treeBytes } from './file-copy';
import { serverVersion } from './physical-backup';

const run = promisify(execFile);

/** The folder of the backup that pg_dump writes (its directory format). */
export const DUMP_FOLDER = 'dump';

/** Where PostgreSQL's client tools are installed, newest major first, then the command search path. */
function candidates(tool: 'pg_dump' | 'pg_restore'): string[] {
  const found: { major: number; file: string }[] = [];
  for (const [root, pattern] of [
    ['/usr/lib/postgresql', /^(\d+)$/],
    ['/usr', /^pgsql-(\d+)$/],
  ] as const) {
    const names = existsSync(root) ? readdirSync(root) : [];
    for (const name of names) {
      const major = pattern.exec(name)?.[1];
      const file = path.join(root, name, 'bin', tool);
      if (major && existsSync(file)) found.push({ major: Number(major), file });
    }
  }
  return [...found.sort((a, b) => b.major - a.major).map((c) => c.file), tool];
}

async function toolMajor(file: string): Promise<number | null> {
  try {
    const { stdout } = await run(file, ['--version'], { timeout: 10_000 });
    const match = /\(PostgreSQL\) (\d+)/.exec(stdout);
    return match ? Number(match[1]) : null;
  } catch {
    return null;
  }
}

/**
 * The newest installed pg_dump or pg_restore. pg_dump refuses a server of a newer major version
 * than its own, so a tool older than the server is an error that names both versions.
 */
export async function clientTool(tool: 'pg_dump' | 'pg_restore', serverMajor: number): Promise<string> {
  let newest = 0;
  for (const file of candidates(tool)) {
    const major = await toolMajor(file);
    if (major === null) continue;
    if (major >= serverMajor) return file;
    newest = Math.max(newest, major);
  }
  throw new Error(
    newest
      ? `${tool} ${newest} is the newest installed, and it cannot work with PostgreSQL ${serverMajor}: ` +
          `install the client tools of PostgreSQL ${serverMajor} or later`
      : `${tool} is not installed: install PostgreSQL's client tools (${serverMajor} or later)`,
  );
}

/** Runs a client tool; its stderr becomes the error's message when it fails. */
function runTool(file: string, args: string[], onLine?: (line: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
      for (const line of d.split('\n')) if (line.trim()) onLine?.(line);
    });
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0
        ? resolve()
        : reject(new Error(`${path.basename(file)} failed (${code}): ${stderr.trim().split('\n').pop()}`)),
    );
  });
}

/** Parallel jobs for pg_dump and pg_restore: the cores, at most 4 (each job is one connection). */
export function dumpJobs(): number {
  return Math.max(1, Math.min(4, availableParallelism()));
}

/**
 * `pg_dump --format=directory --jobs`: one consistent snapshot of the database (the jobs share it
 * through an exported snapshot) while the service keeps ingesting.
 */
export async function dumpDatabase(
  url: string,
  out: string,
  onTable?: (line: string) => void,
): Promise<{ postgresVersion: string; bytes: number }> {
  const client = await connectClient({ connectionString: url, application_name: 'tally-backup' });
  const postgresVersion = await serverVersion(client).finally(() => client.end().catch(() => undefined));
  const pgDump = await clientTool('pg_dump', Number(postgresVersion.split('.')[0]));
  const target = path.join(out, DUMP_FOLDER);
  await runTool(
    pgDump,
    [
      '--format=directory',
      `--jobs=${dumpJobs()}`,
      '--no-owner',
      '--no-privileges',
      '--verbose',
      '--file',
      target,
      '--dbname',
      url,
    ],
    onTable,
  );
  return { postgresVersion, bytes: await treeBytes(target) };
}

/** `pg_restore --jobs` of a directory dump into an empty database. */
export async function restoreDump(url: string, from: string, serverMajor: number): Promise<void> {
  const pgRestore = await clientTool('pg_restore', serverMajor);
  await runTool(pgRestore, [
    `--jobs=${dumpJobs()}`,
    '--no-owner',
    '--no-privileges',
    '--exit-on-error',
    '--dbname',
    url,
    path.join(from, DUMP_FOLDER),
  ]);
}
