import { wholeNumber } from '@app/cli/arguments';
import { defineJsonCommand } from '@app/cli/command';
import { UsageError } from '@app/cli/exit-codes';
import type { CliRuntime } from '@app/cli/runtime';
import type { BackupManifest } from '@app/database/backup/manifest';

// The backup code loads only when the command runs.
function backupCode(): typeof import('@app/database/backup/backup') {
  return require('../../database/backup/backup') as typeof import('@app/database/backup/backup');
}

/**
 * No pause by default: on the 2-core machine another app's ingest kept its rate alone while the copy
 * ran flat out (it waits on the disk, not the cores); a pause only lengthens the backup there
 * (docs/decisions.md, "Backups"). A disk that ingest shares with other work may want one.
 */
const DEFAULT_PAUSE_PERCENT = 0;

function megabytes(bytes: number): string {
  return `${(bytes / 1_048_576).toFixed(1)} MB`;
}

/** A refusal of the backup code (a non-empty folder, a newer schema) is a usage error: exit 2. */
export async function refusalsAsUsage<T>(work: () => Promise<T>): Promise<T> {
  const { BackupRefused } =
    require('../../database/backup/manifest') as typeof import('@app/database/backup/manifest');
  try {
    return await work();
  } catch (err) {
    if (err instanceof BackupRefused) throw new UsageError(err.message);
    throw err;
  }
}

export function backupCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'backup',
    'Take an online, consistent backup of the database while Tally serves: the embedded cluster is copied ' +
      'with PostgreSQL’s backup API (files and WAL), a DATABASE_URL is dumped with pg_dump --format=directory ' +
      '--jobs. Writes manifest.json beside the data. The erasure ledger (ERASURE_LEDGER_PATH) is not part of ' +
      'it: keep it on storage that outlives the database.',
    ['tally backup --out /backups/tally-2026-11-27', 'tally backup --out /backups/nightly --json'],
    '{ "out", "createdAt", "tallyVersion", "schemaVersion", "postgresVersion", "format", "bytes", "seconds" }',
  )
    .requiredOption('--out <dir>', 'a new or empty folder for the backup')
    .option(
      '--pause-percent <n>',
      'embedded cluster: after each MiB copied, pause for this percent of the time it took, leaving the disk to ingest',
      wholeNumber(0, 10_000),
      DEFAULT_PAUSE_PERCENT,
    )
    .action(async (options) => {
      const config = rt.config();
      const tty = Boolean(process.stderr.isTTY) && !options.json;
      const started = Date.now();
      let shown = 0;
      const progress = (done: number, total: number) => {
        if (!tty || Date.now() - shown < 200) return;
        shown = Date.now();
        const pct = total > 0 ? Math.min(100, Math.floor((done / total) * 100)) : 0;
        rt.io.stderr(`\rbackup: ${pct}% (${megabytes(done)} of ${megabytes(total)})`);
      };
      const onTable = (line: string) => tty && rt.io.stderr(`\r${line.slice(0, 100).padEnd(100)}`);
      const manifest: BackupManifest = await refusalsAsUsage(() =>
        backupCode().takeBackup(config, options.out, {
          progress,
          onTable,
          pausePercent: options.pausePercent,
        }),
      );
      if (tty) rt.io.stderr(`\rbackup: 100% (${megabytes(manifest.bytes)})`.padEnd(100) + '\n');
      const seconds = Math.round((Date.now() - started) / 100) / 10;
      rt.print(
        {
          json: { out: options.out, ...manifest, seconds },
          text:
            `Backed up ${backupCode().describeTarget(config)} to ${options.out}: ${manifest.format}, ` +
            `${megabytes(manifest.bytes)}, PostgreSQL ${manifest.postgresVersion}, schema ${manifest.schemaVersion}, ` +
            `in ${seconds} s.`,
        },
        options.json,
      );
    });
}
