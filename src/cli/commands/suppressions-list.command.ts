import { uuid } from '@app/cli/arguments';
import { defineJsonCommand } from '@app/cli/command';
import type { CliRuntime } from '@app/cli/runtime';

export function suppressionsListCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'list',
    'List the suppressed users of an app: their events are refused (user_suppressed). Each is shown as ' +
      'the keyed hash under which it is stored; the list never holds the ids.',
    ['tally suppressions list --app 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c --json'],
    '[{ "appId", "userHash", "createdAt" }]',
  )
    .requiredOption('--app <appId>', 'the app', uuid)
    .action(async (options) => {
      const services = await rt.services('privacy');
      await services.apps.assertExist([options.app]);
      const rows = await services.privacy().suppressions.list(options.app);
      const json = rows.map((r) => ({ ...r, createdAt: new Date(r.createdAt).toISOString() }));
      const text = json.length
        ? json.map((r) => `${r.userHash}  since ${r.createdAt}`).join('\n')
        : 'No suppressed users.';
      rt.print({ json, text }, options.json);
    });
}
