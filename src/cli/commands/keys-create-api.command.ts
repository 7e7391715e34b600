import { Option } from '@commander-js/extra-typings';
import { KNOWN_SCOPES } from '@app/auth/scopes';
import { lifeInDays, oneOfEach, uuids, wholeNumber } from '@app/cli/arguments';
import { cliActor } from '@app/cli/actor';
import { defineJsonCommand } from '@app/cli/command';
import type { CliRuntime } from '@app/cli/runtime';

export function keysCreateApiCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'create-api',
    `Issue an API key for one or more apps: reads, exports, erasure or tracking plans. Scopes: ${KNOWN_SCOPES.join(', ')}.`,
    [
      'tally keys create-api --app 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c --scope events:read --scope rollups:read',
      'tally keys create-api --app <appId> --app <otherAppId> --scope rollups:read --expires-in 90d --json',
    ],
    '{ "id", "key", "appIds", "scopes", "expiresAt" }',
  )
    .requiredOption('--app <appId>', 'an app the key may read; repeat for several', uuids)
    .addOption(
      new Option('--scope <scope>', 'a scope to grant; repeat for several')
        .choices(KNOWN_SCOPES)
        .argParser(oneOfEach(KNOWN_SCOPES))
        .makeOptionMandatory(),
    )
    .option(
      '--expires-in <life>',
      'the key stops working after this many days, such as 90d (1d to 3650d); default never',
      lifeInDays,
    )
    .option(
      '--expires-in-days <n>',
      'the same as --expires-in <n>d (kept for scripts that use it)',
      wholeNumber(1, 3650),
    )
    .option('--name <label>', 'a label for people, shown by keys list')
    .action(async (options) => {
      const { keys } = await rt.services();
      const key = await keys.createApiKey(
        options.app,
        options.scope,
        options.expiresIn ?? options.expiresInDays ?? null,
        options.name ?? null,
        cliActor(),
      );
      const expiry = key.expiresAt ? `, expires ${key.expiresAt}` : '';
      rt.print(
        {
          json: key,
          text: `API key ${key.id} for ${key.appIds.join(', ')} with ${key.scopes.join(', ')}${expiry}.\nStore it now; it is not shown again:\n${key.key}`,
        },
        options.json,
      );
    });
}
