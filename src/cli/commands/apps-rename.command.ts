import { uuid } from '@app/cli/arguments';
import { cliActor } from '@app/cli/actor';
import { defineJsonCommand } from '@app/cli/command';
import type { CliRuntime } from '@app/cli/runtime';

export function appsRenameCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'rename',
    'Rename an app. Its id, keys and data stay as they are.',
    ['tally apps rename 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c "Checkout (iOS)"'],
    '{ "id", "name", "timezone", "createdAt" }',
  )
    .argument('<appId>', 'the app', uuid)
    .argument('<name>', 'its new name, 1 to 200 characters')
    .action(async (appId, name, options) => {
      const { apps } = await rt.services();
      const app = await apps.rename(appId, name, cliActor());
      rt.print({ json: app, text: `Renamed app ${app.id} to ${app.name}.` }, options.json);
    });
}
