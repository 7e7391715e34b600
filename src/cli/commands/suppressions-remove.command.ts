import { uuid } from '@app/cli/arguments';
import { cliActor } from '@app/cli/actor';
import { defineJsonCommand } from '@app/cli/command';
import type { CliRuntime } from '@app/cli/runtime';

export function suppressionsRemoveCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'remove',
    'Accept the events of a suppressed user again, on every instance within a second. Removing a user ' +
      'who is not suppressed changes nothing.',
    ['tally suppressions remove --app 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c --user u-123'],
    '{ "appId", "removed" }',
  )
    .requiredOption('--app <appId>', 'the app', uuid)
    .requiredOption('--user <id>', 'the user id as the app sends it')
    .action(async (options) => {
      const services = await rt.services('privacy');
      await services.apps.assertExist([options.app]);
      const removed = await services.privacy().suppressions.remove(options.app, options.user, cliActor());
      rt.print(
        {
          json: { appId: options.app, removed },
          text: removed ? 'The user’s events are accepted again.' : 'That user was not suppressed.',
        },
        options.json,
      );
    });
}
