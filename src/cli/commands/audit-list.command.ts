import { AUDIT_LIST_MAX, type AuditActor, type AuditRecord } from '@app/audit/audit.types';
import { instantArg, uuid, wholeNumber } from '@app/cli/arguments';
import { defineJsonCommand } from '@app/cli/command';
import { table } from '@app/cli/output';
import type { CliRuntime } from '@app/cli/runtime';

function who(actor: AuditActor): string {
  return actor.type === 'api_key' ? `key ${actor.keyId}` : `cli ${actor.osUser}`;
}

/** The entries as a table, oldest first: when, who, what, which app and target, and the details. */
export function auditTable(entries: AuditRecord[]): string {
  return table(
    ['AT (UTC)', 'ACTOR', 'ACTION', 'APP', 'TARGET', 'DETAILS'],
    entries.map((e) => [
      e.at.slice(0, 19).replace('T', ' '),
      who(e.actor),
      e.action,
      e.appId ?? '-',
      e.targetId ?? '-',
      Object.keys(e.details).length ? JSON.stringify(e.details) : '-',
    ]),
  );
}

export function auditListCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'list',
    'Show the audit log of admin actions (apps, keys, time zones, deletions, suppressions, tracking plans, quarantine replays): the newest entries, oldest first. The log is append-only.',
    [
      'tally audit list',
      'tally audit list --app 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c --since 2026-11-01',
      'tally audit list --since 2026-11-24T12:00:00Z --json',
    ],
    '[{ "id", "at", "actor": { "type": "cli", "osUser" } | { "type": "api_key", "keyId" }, "action", "appId", "targetId", "details" }]',
  )
    .option('--app <appId>', 'only the entries of this app', uuid)
    .option(
      '--since <when>',
      'only entries at or after this instant (YYYY-MM-DD, ISO-8601 or epoch ms)',
      instantArg,
    )
    .option(
      '--limit <n>',
      `how many of the newest entries (1 to ${AUDIT_LIST_MAX}, default 1000)`,
      wholeNumber(1, AUDIT_LIST_MAX),
    )
    .action(async (options) => {
      const { audit } = await rt.services();
      const entries = await audit.list({
        appId: options.app,
        since: options.since,
        limit: options.limit ?? 1000,
      });
      rt.print({ json: entries, text: auditTable(entries) }, options.json);
    });
}
