import { existsSync, readFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { MIGRATIONS } from '@migrations/index';

/**
 * How a backup was made: `physical`, a copy of the embedded cluster's files taken between
 * PostgreSQL's pg_backup_start() and pg_backup_stop(), with the WAL that makes it consistent;
 * `pg_dump-directory`, `pg_dump --format=directory --jobs` of the database named by DATABASE_URL.
 */
export type BackupFormat = 'physical' | 'pg_dump-directory';
export const BACKUP_FORMATS: readonly BackupFormat[] = ['physical', 'pg_dump-directory'];

/** manifest.json, at the top of every backup folder. */
export interface BackupManifest {
  createdAt: string;
  tallyVersion: string;
  /** The newest migration applied to the backed-up database (its timestamp). */
  schemaVersion: number;
  postgresVersion: string;
  format: BackupFormat;
  /** Bytes of the backup's files, the manifest excluded. */
  bytes: number;
}

export const MANIFEST_FILE = 'manifest.json';

/** Why a backup or a restore was refused; nothing was changed (the CLI's exit code 2). */
export class BackupRefused extends Error {
  constructor(
    readonly code: 'target_not_empty' | 'wrong_target' | 'backup_too_new' | 'not_a_backup' | 'out_not_empty',
    message: string,
  ) {
    super(message);
  }
}

/** The schema version this build brings the database to: its newest migration's timestamp. */
export function latestSchemaVersion(): number {
  return Math.max(...MIGRATIONS.map((m) => Number(/(\d{13})$/.exec(m.name)?.[1] ?? 0)));
}

/** The version in Tally's package.json (found upwards from this file, in src/ or dist/src/). */
export function tallyVersion(): string {
  for (let dir = __dirname; dir !== path.dirname(dir); dir = path.dirname(dir)) {
    const file = path.join(dir, 'package.json');
    if (!existsSync(file)) continue;
    const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
    if (pkg.name === 'tally') return pkg.version ?? '0.0.0';
  }
  return '0.0.0';
}

export async function writeManifest(dir: string, manifest: BackupManifest): Promise<void> {
  await writeFile(path.join(dir, MANIFEST_FILE), JSON.stringify(manifest, null, 2) + '\n');
}

/** Reads and checks a backup's manifest; refuses a folder that is not a backup. */
export async function readManifest(dir: string): Promise<BackupManifest> {
  let text: string;
  try {
    text = await readFile(path.join(dir, MANIFEST_FILE), 'utf8');
  } catch {
    throw new BackupRefused('not_a_backup', `${dir} holds no ${MANIFEST_FILE}: not a Tally backup`);
  }
  let m: Partial<BackupManifest>;
  try {
    m = JSON.parse(text) as Partial<BackupManifest>;
  } catch {
    throw new BackupRefused('not_a_backup', `${path.join(dir, MANIFEST_FILE)} is not JSON`);
  }
  if (
    typeof m.schemaVersion !== 'number' ||
    typeof m.createdAt !== 'string' ||
    typeof m.postgresVersion !== 'string' ||
    !BACKUP_FORMATS.includes(m.format as BackupFormat)
  ) {
    throw new BackupRefused(
      'not_a_backup',
      `${path.join(dir, MANIFEST_FILE)} is not a Tally backup manifest`,
    );
  }
  return m as BackupManifest;
}

/** Refuses a backup of a schema newer than this build knows; an older one is migrated after restore. */
export function checkSchema(manifest: BackupManifest): void {
  const latest = latestSchemaVersion();
  if (manifest.schemaVersion > latest) {
    throw new BackupRefused(
      'backup_too_new',
      `the backup's schema (${manifest.schemaVersion}) is newer than this Tally's (${latest}), ` +
        `made by Tally ${manifest.tallyVersion ?? '?'}: restore it with that version or a newer one`,
    );
  }
}
