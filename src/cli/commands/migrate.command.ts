import { defineJsonCommand } from '@app/cli/command';
import type { CliRuntime } from '@app/cli/runtime';

export function migrateCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'migrate',
    'Apply the pending schema migrations, under a lock that servers starting at the same time respect.',
    ['tally migrate', 'DATABASE_URL=postgres://tally@db.internal/tally tally migrate --json'],
    '{ "applied": [names of the migrations applied] }',
  ).action(async (options) => {
    const applied = await rt.migrate();
    rt.print(
      {
        json: { applied },
        text: applied.length
          ? `Applied ${applied.length} migration(s):\n${applied.join('\n')}`
          : 'The schema is up to date.',
      },
      options.json,
    );
  });
}
