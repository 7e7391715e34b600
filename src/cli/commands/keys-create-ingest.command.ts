import { Option } from '@commander-js/extra-typings';
import { lifeInDays, uuid } from '@app/cli/arguments';
import { cliActor } from '@app/cli/actor';
import { defineJsonCommand } from '@app/cli/command';
import type { CliRuntime } from '@app/cli/runtime';

export function keysCreateIngestCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'create-ingest',
    'Issue an ingest key for one app. Apps ship it to send events; live keys are metered, test keys are not.',
    [
      'tally keys create-ingest --app 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c',
      'tally keys create-ingest --app 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c --mode test --name "CI" --json',
      'tally keys create-ingest --app 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c --expires-in 90d',
    ],
    '{ "id", "key", "appId", "mode", "expiresAt" }',
  )
    .requiredOption('--app <appId>', 'the app the key sends events to', uuid)
    .addOption(new Option('--mode <mode>', 'live or test').choices(['live', 'test'] as const).default('live'))
    .option('--name <label>', 'a label for people, shown by keys list')
    .option(
      '--expires-in <life>',
      'the key stops working after this many days, such as 90d (1d to 3650d); default never',
      lifeInDays,
    )
    .action(async (options) => {
      const { keys } = await rt.services();
      const key = await keys.createIngestKey(
        options.app,
        options.mode,
        options.name ?? null,
        cliActor(),
        options.expiresIn ?? null,
      );
      rt.print(
        {
          json: key,
          text: `Ingest key (${key.mode}) for app ${key.appId}, id ${key.id}${key.expiresAt ? `, expires ${key.expiresAt}` : ''}.\nStore it now; it is not shown again:\n${key.key}`,
        },
        options.json,
      );
    });
}
