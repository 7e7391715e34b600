import type { KeyListing } from '@app/auth/keys.service';
import { UNUSED_AFTER_DAYS } from '@app/auth/key-format';
import { uuid } from '@app/cli/arguments';
import { defineJsonCommand } from '@app/cli/command';
import { instant, table } from '@app/cli/output';
import type { CliRuntime } from '@app/cli/runtime';

function status(key: KeyListing, now: number): string {
  if (key.revokedAt) return 'revoked';
  if (key.expiresAt && Date.parse(key.expiresAt) <= now) return 'expired';
  return key.unused ? `active, unused ${UNUSED_AFTER_DAYS}d+` : 'active';
}

/** The listing as a table: ids, masks, when each key was last used and when it expires. */
export function keysTable(keys: KeyListing[], now = Date.now()): string {
  return table(
    ['ID', 'KIND', 'KEY', 'NAME', 'APPS', 'SCOPES', 'LAST USED (UTC)', 'EXPIRES (UTC)', 'STATUS'],
    keys.map((k) => [
      k.id,
      k.kind === 'ingest' ? `ingest/${k.mode}` : 'api',
      k.mask,
      k.name ?? '-',
      k.appIds.join(','),
      k.scopes.join(',') || '-',
      instant(k.lastUsedAt, now, 'never'),
      instant(k.expiresAt, now, 'never'),
      status(k, now),
    ]),
  );
}

export function keysListCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'list',
    'List keys, newest first, with when each was last used and when it expires. An active key neither used nor ' +
      `made in the last ${UNUSED_AFTER_DAYS} days is flagged unused: revoke what nobody uses. Secrets are never ` +
      'shown, only masks.',
    ['tally keys list', 'tally keys list --app 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c --json'],
    '[{ "id", "kind", "mask", "name", "mode", "appIds", "scopes", "createdAt", "lastUsedAt", "expiresAt", "revokedAt", "unused" }]',
  )
    .option('--app <appId>', 'only the keys that grant access to this app', uuid)
    .action(async (options) => {
      const { keys } = await rt.services();
      const list = await keys.list(options.app);
      rt.print({ json: list, text: keysTable(list) }, options.json);
    });
}
