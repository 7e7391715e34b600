import { existsSync } from 'node:fs';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import type { AppConfig } from '@app/config/config';
import { attachEmbeddedDatabase } from '@app/database/embedded';
import { connectClient } from '@app/database/pg-client';
import { prepareDatabase } from '@app/database/prepare';
import { dumpDatabase, restoreDump } from './dump-backup';
import { chownTree, copyTree, emptyFolder, Progress } from './file-copy';
import {
  BackupManifest,
  BackupRefused,
  checkSchema,
  readManifest,
  tallyVersion,
  writeManifest,
} from './manifest';
import { backupCluster, DATA_FOLDER, embeddedDataDirectory } from './physical-backup';

/** Where a backup comes from or a restore goes: the embedded cluster's folder, or the database's URL without its password. */
export function describeTarget(config: AppConfig): string {
  if (!config.databaseUrl) return `embedded PostgreSQL in ${config.embeddedPgDir}`;
  const url = new URL(config.databaseUrl);
  url.password = '';
  return url.toString();
}

async function schemaVersionOf(url: string): Promise<number> {
  const client = await connectClient({ connectionString: url, application_name: 'tally-backup' });
  try {
    const { rows } = await client.query<{ v: string | null }>(
      `SELECT max("timestamp")::text AS v FROM migrations`,
    );
    return Number(rows[0].v ?? 0);
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function refuseNonEmptyOut(out: string): Promise<void> {
  const names = await fs.readdir(out).catch(() => null);
  if (names !== null && names.length > 0) {
    throw new BackupRefused('out_not_empty', `${out} is not empty: a backup goes into a new or empty folder`);
  }
}

/**
 * Takes an online backup of Tally's database into `out` (a new or empty folder): a physical copy
 * of the embedded cluster, or `pg_dump --format=directory --jobs` of DATABASE_URL. The files are
 * written into a sibling folder that is renamed to `out` once the manifest is written, so `out`
 * never holds half a backup.
 */
export interface BackupOptions {
  progress?: Progress;
  onTable?: (line: string) => void;
  /** The embedded copy's pause after each chunk, in percent of the chunk's time (see file-copy.ts). */
  pausePercent: number;
}

export async function takeBackup(
  config: AppConfig,
  out: string,
  options: BackupOptions,
): Promise<BackupManifest> {
  const target = path.resolve(out);
  await refuseNonEmptyOut(target);
  const work = `${target}.partial-${process.pid}`;
  await fs.mkdir(work, { recursive: true, mode: 0o700 });
  const embedded = config.databaseUrl
    ? null
    : await attachEmbeddedDatabase(config.embeddedPgDir, config.embeddedPgPort);
  try {
    const url = embedded?.url ?? config.databaseUrl!;
    const schemaVersion = await schemaVersionOf(url);
    const taken = embedded
      ? await backupCluster(url, embeddedDataDirectory(config.embeddedPgDir), work, options)
      : await dumpDatabase(url, work, options.onTable);
    const manifest: BackupManifest = {
      createdAt: new Date().toISOString(),
      tallyVersion: tallyVersion(),
      schemaVersion,
      postgresVersion: taken.postgresVersion,
      format: embedded ? 'physical' : 'pg_dump-directory',
      bytes: taken.bytes,
    };
    await writeManifest(work, manifest);
    await fs.rm(target, { recursive: true, force: true });
    await fs.rename(work, target);
    return manifest;
  } catch (err) {
    await fs.rm(work, { recursive: true, force: true });
    throw err;
  } finally {
    await embedded?.release();
  }
}

/** What a restore brought back, for the CLI to print. */
export interface RestoreResult {
  from: string;
  target: string;
  backup: BackupManifest;
  migrationsApplied: string[];
  apps: number;
  events: number;
  deletions: number;
}

/** True when the database holds any table, sequence or view of its own (not PostgreSQL's). */
async function databaseHasObjects(url: string): Promise<boolean> {
  const client = await connectClient({ connectionString: url, application_name: 'tally-restore' });
  try {
    const { rows } = await client.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
          AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')`,
    );
    return rows[0].n > 0;
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function counts(url: string): Promise<{ apps: number; events: number; deletions: number }> {
  const client = await connectClient({ connectionString: url, application_name: 'tally-restore' });
  try {
    const { rows } = await client.query<{ apps: number; events: number; deletions: number }>(
      `SELECT (SELECT count(*)::int FROM apps) AS apps, (SELECT count(*)::float8 FROM events) AS events,
              (SELECT count(*)::int FROM deletions) AS deletions`,
    );
    return rows[0];
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Puts a physical backup's files in place of a new cluster's. The cluster is made by the embedded
 * helper (initdb, as the user who runs PostgreSQL), stopped, and its files replaced; its next
 * start replays the backup's WAL.
 */
async function placePhysicalBackup(config: AppConfig, from: string): Promise<void> {
  const fresh = await attachEmbeddedDatabase(config.embeddedPgDir, config.embeddedPgPort);
  await fresh.release();
  const pgdata = embeddedDataDirectory(config.embeddedPgDir);
  if (existsSync(path.join(pgdata, 'postmaster.pid'))) {
    throw new Error(`another process uses the new cluster in ${pgdata}; nothing restored`);
  }
  const owner = await fs.stat(pgdata);
  await emptyFolder(pgdata);
  await copyTree(path.join(from, DATA_FOLDER), pgdata);
  if (process.getuid?.() === 0) await chownTree(pgdata, owner.uid, owner.gid);
}

/** Refuses, before changing anything, a target that is not empty or cannot take this backup. */
async function checkTarget(config: AppConfig, manifest: BackupManifest): Promise<void> {
  if (manifest.format === 'physical' && config.databaseUrl) {
    throw new BackupRefused(
      'wrong_target',
      'this is a physical backup of an embedded cluster: restore it into an embedded one (unset DATABASE_URL)',
    );
  }
  if (config.databaseUrl) {
    if (await databaseHasObjects(config.databaseUrl)) {
      throw new BackupRefused('target_not_empty', `${describeTarget(config)} is not empty; nothing restored`);
    }
  } else if (existsSync(path.join(embeddedDataDirectory(config.embeddedPgDir), 'PG_VERSION'))) {
    throw new BackupRefused(
      'target_not_empty',
      `${config.embeddedPgDir} already holds a cluster; restore into a new EMBEDDED_PG_DIR. Nothing restored`,
    );
  }
}

/**
 * Restores a backup into an empty target: a new embedded cluster in EMBEDDED_PG_DIR, or the empty
 * database named by DATABASE_URL. A backup of a newer schema is refused; an older one is migrated.
 */
export async function restoreBackup(config: AppConfig, from: string): Promise<RestoreResult> {
  const source = path.resolve(from);
  const manifest = await readManifest(source);
  checkSchema(manifest);
  await checkTarget(config, manifest);
  if (manifest.format === 'physical') {
    await placePhysicalBackup(config, source);
  } else {
    const embedded = config.databaseUrl
      ? null
      : await attachEmbeddedDatabase(config.embeddedPgDir, config.embeddedPgPort);
    try {
      await restoreDump(
        embedded?.url ?? config.databaseUrl!,
        source,
        Number(manifest.postgresVersion.split('.')[0]),
      );
    } finally {
      await embedded?.release();
    }
  }
  const database = await prepareDatabase(config, { migrate: true });
  try {
    const found = await counts(database.config.databaseUrl!);
    return {
      from: source,
      target: describeTarget(config),
      backup: manifest,
      migrationsApplied: database.migrationsApplied,
      ...found,
    };
  } finally {
    await database.release();
  }
}
