import { uuid } from '@app/cli/arguments';
import { cliActor } from '@app/cli/actor';
import { defineJsonCommand } from '@app/cli/command';
import { UsageError } from '@app/cli/exit-codes';
import type { CliRuntime } from '@app/cli/runtime';

const MAX_USERS = 1_000;

function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

export function usersDeleteCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'delete',
    'Erase users of an app: delete their events from every day, recompute the rollups of the days they ' +
      'touched, and (unless --no-suppress) refuse their future events. A running server does the work; ' +
      'with --wait this command does it, and prints the finished deletion.',
    [
      'tally users delete --app 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c --user u-123 --user u-456 --wait',
      'tally users delete --app 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c --user u-123 --no-suppress --json',
    ],
    '{ "id", "appId", "status", "users", "suppress", "eventsDeleted", "daysRecomputed", "createdAt", "startedAt", "finishedAt" }',
  )
    .requiredOption('--app <appId>', 'the app', uuid)
    .requiredOption('--user <id>', 'a user id as the app sends it (repeat for more, up to 1,000)', collect)
    .option('--no-suppress', 'do not refuse the users’ future events')
    .option('--wait', 'run the deletion here and print it once it has ended')
    .action(async (options) => {
      const users = [...new Set(options.user)];
      if (users.length > MAX_USERS) throw new UsageError(`at most ${MAX_USERS} --user values`);
      if (users.some((u) => u.length < 1 || u.length > 200)) {
        throw new UsageError('a --user value is 1 to 200 characters');
      }
      const services = await rt.services('privacy');
      const privacy = services.privacy();
      let deletion = await privacy.deletions.request(
        { appId: options.app, anonymousUserIds: users, userIds: [], suppress: options.suppress },
        cliActor(),
      );
      if (options.wait) deletion = await privacy.runToEnd(deletion.id);
      rt.print(
        {
          json: deletion,
          text:
            deletion.status === 'pending'
              ? `Deletion ${deletion.id} of ${deletion.users} users is pending; a running server completes it ` +
                `(see it with GET /api/v1/deletions/${deletion.id}, or run again with --wait).`
              : `Deletion ${deletion.id}: ${deletion.status}, ${deletion.eventsDeleted} events deleted, ` +
                `${deletion.daysRecomputed} days recomputed.`,
        },
        options.json,
      );
    });
}
