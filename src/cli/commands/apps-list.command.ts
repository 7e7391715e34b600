import { defineJsonCommand } from '@app/cli/command';
import { instant, table } from '@app/cli/output';
import type { CliRuntime } from '@app/cli/runtime';

export function appsListCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'list',
    'List every app, oldest first.',
    ['tally apps list', 'tally apps list --json'],
    '[{ "id", "name", "timezone", "dimensions", "createdAt" }]',
  ).action(async (options) => {
    const { apps } = await rt.services();
    const list = await apps.list();
    const now = Date.now();
    const text = table(
      ['ID', 'NAME', 'TIME ZONE', 'DIMENSIONS', 'CREATED (UTC)'],
      list.map((a) => [a.id, a.name, a.timezone, a.dimensions.join(',') || '-', instant(a.createdAt, now)]),
    );
    rt.print({ json: list, text }, options.json);
  });
}
