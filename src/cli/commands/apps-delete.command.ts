import { AppError } from '@app/common/app-error';
import { uuid } from '@app/cli/arguments';
import { cliActor } from '@app/cli/actor';
import { defineJsonCommand } from '@app/cli/command';
import { UsageError } from '@app/cli/exit-codes';
import type { CliRuntime } from '@app/cli/runtime';

/** Asks the person at the terminal to type the app's name; refuses without a terminal or a match. */
async function confirm(rt: CliRuntime, appId: string, name: string): Promise<void> {
  const answer = await rt.io.prompt?.(
    `Delete the app "${name}" (${appId}) and every event, rollup and key of it? This cannot be undone.\n` +
      'Type the app’s name to confirm: ',
  );
  if (answer === undefined || answer === null) {
    throw new UsageError(
      'tally apps delete asks for confirmation on a terminal; pass --yes to run it without one',
    );
  }
  if (answer.trim() !== name) throw new UsageError('the name typed does not match; nothing was deleted');
}

export function appsDeleteCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'delete',
    'Delete an app with all its data. Its keys are revoked at once (a key of several apps loses it), ' +
      'the app is listed nowhere from then on, and a deletion job erases every row of it in every table; ' +
      'a running server does the work and resumes it after a restart; with --wait this command does it.',
    [
      'tally apps delete 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c',
      'tally apps delete 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c --yes --wait --json',
    ],
    '{ "id", "appId", "kind": "app", "status", "eventsDeleted", "createdAt", "startedAt", "finishedAt" }',
  )
    .argument('<appId>', 'the app', uuid)
    .option('--yes', 'do not ask for confirmation (needed when not run from a terminal)')
    .option('--wait', 'run the deletion here and print it once it has ended')
    .action(async (appId, options) => {
      const services = await rt.services('privacy');
      const app = (await services.apps.list()).find((a) => a.id === appId);
      if (!app) throw new AppError('not_found', `No such app: ${appId}`);
      if (!options.yes) await confirm(rt, appId, app.name);
      const privacy = services.privacy();
      let deletion = await privacy.deletions.requestAppDeletion(appId, cliActor());
      if (options.wait) deletion = await privacy.runToEnd(deletion.id);
      const { users: _users, suppress: _suppress, daysRecomputed: _days, ...shown } = deletion;
      rt.print(
        {
          json: { ...shown, kind: 'app' },
          text:
            deletion.status === 'done'
              ? `App ${appId} deleted: ${deletion.eventsDeleted} events and every other row of it.`
              : `App ${appId} is being deleted (deletion ${deletion.id}); its keys are revoked. A running ` +
                'server completes it; run again with --wait to do it here.',
        },
        options.json,
      );
    });
}
