import { existsSync, readFileSync } from 'node:fs';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import type { Client } from 'pg';
import { connectClient } from '@app/database/pg-client';
import { copyDataDirectory, copyWalSegments, Progress, treeBytes } from './file-copy';

/** The folder of the backup that holds the cluster's files. */
export const DATA_FOLDER = 'data';

/**
 * The data directory (`pg/`) of the embedded cluster of the data folder `root`: `root/pg`, or
 * where root's `cluster-location` file points (src/database/embedded-pg.mjs decides that place).
 */
export function embeddedDataDirectory(root: string): string {
  const pointer = path.join(root, 'cluster-location');
  const home = existsSync(pointer) ? readFileSync(pointer, 'utf8').trim() : root;
  return path.join(home, 'pg');
}

export interface PhysicalBackupResult {
  postgresVersion: string;
  bytes: number;
}

interface BackupStop {
  lsn: string;
  labelfile: string;
  spcmapfile: string | null;
}

/**
 * An online, consistent copy of a running cluster whose data directory this process can read,
 * with the server's own low-level backup API, in one session:
 *  1. a temporary physical replication slot, so that no WAL the copy needs is recycled meanwhile;
 *  2. pg_backup_start (with an immediate checkpoint);
 *  3. a copy of the data directory, while the server keeps writing;
 *  4. pg_backup_stop, whose backup_label and WAL range go with the copy;
 *  5. the WAL segments from the start to the stop point.
 * Restoring starts PostgreSQL on the copy: it replays that WAL and opens the database as it was
 * at the stop point, with every transaction committed before it.
 */
export async function backupCluster(
  url: string,
  dataDirectory: string,
  out: string,
  options: { progress?: Progress; pausePercent: number },
): Promise<PhysicalBackupResult> {
  const client = await connectClient({ connectionString: url, application_name: 'tally-backup' });
  try {
    const postgresVersion = await serverVersion(client);
    const total = (await treeBytes(dataDirectory)) - (await treeBytes(path.join(dataDirectory, 'pg_wal')));
    let done = 0;
    const pace = {
      add: (n: number) => options.progress?.((done += n), total),
      pausePercent: options.pausePercent,
    };
    const slot = `tally_backup_${process.pid}`;
    await client.query(`SELECT pg_create_physical_replication_slot($1, true, true)`, [slot]);
    await client.query(`SELECT pg_backup_start($1, true)`, [`tally backup ${new Date().toISOString()}`]);
    let stop: BackupStop;
    try {
      await copyDataDirectory(dataDirectory, path.join(out, DATA_FOLDER), pace);
    } finally {
      const { rows } = await client.query<BackupStop>(
        `SELECT lsn::text, labelfile, spcmapfile FROM pg_backup_stop(false)`,
      );
      stop = rows[0];
    }
    const target = path.join(out, DATA_FOLDER);
    await fs.writeFile(path.join(target, 'backup_label'), stop.labelfile);
    if (stop.spcmapfile) await fs.writeFile(path.join(target, 'tablespace_map'), stop.spcmapfile);
    const first = /START WAL LOCATION: .*\(file ([0-9A-F]{24})\)/.exec(stop.labelfile)?.[1];
    if (!first) throw new Error('pg_backup_stop returned a backup_label without its start segment');
    const { rows } = await client.query<{ last: string }>(`SELECT pg_walfile_name($1::pg_lsn) AS last`, [
      stop.lsn,
    ]);
    const wal = await copyWalSegments(
      path.join(dataDirectory, 'pg_wal'),
      path.join(target, 'pg_wal'),
      first,
      rows[0].last,
    );
    await client.query(`SELECT pg_drop_replication_slot($1)`, [slot]);
    return { postgresVersion, bytes: done + wal + stop.labelfile.length };
  } finally {
    await client.end().catch(() => undefined);
  }
}

export async function serverVersion(client: Client): Promise<string> {
  const { rows } = await client.query<{ v: string }>(`SELECT current_setting('server_version') AS v`);
  return rows[0].v.split(' ')[0];
}
