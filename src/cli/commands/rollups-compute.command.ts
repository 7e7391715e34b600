import { utcDate, uuid } from '@app/cli/arguments';
import { defineJsonCommand } from '@app/cli/command';
import { UsageError } from '@app/cli/exit-codes';
import type { CliRuntime } from '@app/cli/runtime';

export function rollupsComputeCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'compute',
    'Recompute the daily rollups now: every day in the range for one app, or every (app, day) that has ' +
      'events in it. Without --from and --to, every day that still has events. Waits for a scheduled run to finish.',
    [
      'tally rollups compute --from 2026-11-01 --to 2026-11-07',
      'tally rollups compute --app 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c --from 2026-11-01 --to 2026-11-01 --json',
    ],
    '{ "days", "rows" }: app-days recomputed and rollup rows written',
  )
    .option('--app <appId>', 'only this app', uuid)
    .option('--from <date>', "the first day, YYYY-MM-DD, in each app's time zone", utcDate)
    .option('--to <date>', "the last day, YYYY-MM-DD, in each app's time zone", utcDate)
    .action(async (options) => {
      if (options.from && options.to && options.from > options.to) {
        throw new UsageError(`--from (${options.from}) must not be after --to (${options.to})`);
      }
      const services = await rt.services('rollups');
      const result = await services
        .rollups()
        .compute({ appId: options.app, from: options.from, to: options.to });
      rt.print(
        {
          json: { days: result.days, rows: result.rows },
          text: `Computed ${result.rows} rollup rows over ${result.days} app-days.`,
        },
        options.json,
      );
    });
}
