import { appName, timeZone } from '@app/cli/arguments';
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
      'tally apps create --name "Shop Berlin" --timezone Europe/Berlin',
    ],
    '{ "id", "name", "timezone", "createdAt" }',
  )
    .requiredOption('--name <name>', 'the app name, 1 to 200 characters', appName)
    .option('--timezone <zone>', "the IANA time zone of the app's rollup days (default UTC)", timeZone)
    .action(async (options) => {
      const { apps } = await rt.services();
      const app = await apps.create(options.name, cliActor(), options.timezone);
      rt.print(
        { json: app, text: `Created app "${app.name}" (${app.timezone}).\nid: ${app.id}` },
        options.json,
      );
    });
}
