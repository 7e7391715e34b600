import { cliActor } from '@app/cli/actor';
import { defineJsonCommand } from '@app/cli/command';
import type { CliRuntime } from '@app/cli/runtime';

export function appsCreateCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'create',
    'Create an app: a tenant whose events, keys and rollups are kept apart.',
    [
      'tally apps create --name "Shop iOS"',
      'APP_ID=$(tally apps create --name "Shop iOS" --json | jq -r .id)',
    ],
    '{ "id", "name", "createdAt" }',
  )
    .requiredOption('--name <name>', 'the app name, 1 to 200 characters')
    .action(async (options) => {
      const { apps } = await rt.services();
      const app = await apps.create(options.name, cliActor());
      rt.print({ json: app, text: `Created app "${app.name}".\nid: ${app.id}` }, options.json);
    });
}
