import { timeZone, uuid } from '@app/cli/arguments';
import { cliActor } from '@app/cli/actor';
import { defineJsonCommand } from '@app/cli/command';
import type { CliRuntime } from '@app/cli/runtime';

export function appsSetTimezoneCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'set-timezone',
    "Set an app's time zone (IANA). Its rollup days become calendar days there: every retained day is " +
      'recomputed in the new zone, and reads answer in the old zone until that is complete.',
    [
      'tally apps set-timezone 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c Europe/Berlin',
      'tally apps set-timezone 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c America/New_York --json',
    ],
    '{ "appId", "timezone", "previousTimezone", "recomputing", "fromDate" }',
  )
    .argument('<appId>', 'the app', uuid)
    .argument('<zone>', 'an IANA time zone, such as UTC, Europe/Berlin or America/New_York', timeZone)
    .action(async (appId: string, zone: string, options: { json?: boolean }) => {
      const services = await rt.services('rollups');
      const change = await services.rollups().setTimezone(appId, zone, cliActor());
      const text = change.recomputing
        ? `Time zone of ${change.appId} set to ${change.timezone} (was ${change.previousTimezone}).\n` +
          `Rollups from ${change.fromDate} on are recomputed in ${change.timezone}; ` +
          `reads answer in ${change.previousTimezone} until that is done.`
        : `Time zone of ${change.appId} set to ${change.timezone}.`;
      rt.print({ json: change, text }, options.json);
    });
}
