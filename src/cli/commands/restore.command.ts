import { defineJsonCommand } from '@app/cli/command';
import type { CliRuntime } from '@app/cli/runtime';
import { refusalsAsUsage } from './backup.command';

export function restoreCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'restore',
    'Restore a backup of tally backup into an empty target: a new embedded cluster in EMBEDDED_PG_DIR, or the ' +
      'empty database named by DATABASE_URL. A target that holds anything is refused (exit 2) and left as it ' +
      'is; so is a backup of a newer schema, while an older one is migrated. Then every erasure of the ' +
      'ledger (ERASURE_LEDGER_PATH) that the backup lacks is applied again.',
    ['EMBEDDED_PG_DIR=/var/lib/tally/new tally restore --from /backups/tally-2026-11-27'],
    '{ "from", "target", "backup": { manifest }, "migrationsApplied", "apps", "events", "deletions", "ledger": { "entries", "reapplied", "unknownApp", "skippedLines" } }',
  )
    .requiredOption('--from <dir>', 'a folder written by tally backup')
    .action(async (options) => {
      const { restoreBackup } =
        require('../../database/backup/backup') as typeof import('@app/database/backup/backup');
      const restored = await refusalsAsUsage(() => restoreBackup(rt.config(), options.from));
      const ledger = await (await rt.services('privacy')).privacy().replayLedger();
      const b = restored.backup;
      rt.print(
        {
          json: { ...restored, ledger },
          text: [
            `Restored ${restored.from} (${b.format}, taken ${b.createdAt} by Tally ${b.tallyVersion}, ` +
              `PostgreSQL ${b.postgresVersion}, schema ${b.schemaVersion}) into ${restored.target}.`,
            `${restored.apps} apps, ${restored.events} events, ${restored.deletions} deletions.`,
            restored.migrationsApplied.length
              ? `Migrated: ${restored.migrationsApplied.join(', ')}.`
              : 'The schema is up to date.',
            `Erasure ledger: ${ledger.entries} entries, ${ledger.reapplied.length} deletions applied again` +
              (ledger.unknownApp.length ? `, ${ledger.unknownApp.length} of unknown apps skipped.` : '.'),
          ].join('\n'),
        },
        options.json,
      );
    });
}
