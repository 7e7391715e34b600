import { InvalidArgumentError } from '@commander-js/extra-typings';
import { cliActor } from '@app/cli/actor';
import { uuid, wholeNumber } from '@app/cli/arguments';
import { defineJsonCommand } from '@app/cli/command';
import { table } from '@app/cli/output';
import type { CliRuntime } from '@app/cli/runtime';
import type { ViolationCode } from '@app/plans/plan.types';

const CODES: ViolationCode[] = ['schema_violation', 'unplanned_event'];

function code(value: string): ViolationCode {
  if (!CODES.includes(value as ViolationCode))
    throw new InvalidArgumentError(`Allowed values are ${CODES.join(', ')}.`);
  return value as ViolationCode;
}

export function quarantineListCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'list',
    'List the newest quarantined events of an app: the events a tracking plan rejected under enforce.',
    [
      'tally quarantine list --app 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c',
      'tally quarantine list --app 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c --event Checkout.completed --limit 10 --json',
    ],
    '[{ ...event record, "code", "violations": [{ "field", "code", "message" }] }]',
  )
    .requiredOption('--app <appId>', 'the app', uuid)
    .option('--event <eventName>', 'only this event name')
    .option('--code <code>', `only this code (${CODES.join(', ')})`, code)
    .option('--limit <n>', 'at most this many, 1 to 1000', wholeNumber(1, 1000), 50)
    .action(async (options) => {
      const services = await rt.services('plans');
      await services.apps.assertExist([options.app]);
      const page = await services
        .plans()
        .quarantine.list(
          options.app,
          { eventName: options.event, code: options.code },
          undefined,
          options.limit,
        );
      const text = table(
        ['RECEIVED (UTC)', 'EVENT', 'EVENT ID', 'VIOLATIONS'],
        page.events.map((e) => [
          new Date(e.receivedAt).toISOString().slice(0, 19).replace('T', ' '),
          e.eventName,
          e.eventId ?? '-',
          e.violations.map((v) => v.message).join(' '),
        ]),
      );
      rt.print({ json: page.events, text }, options.json);
    });
}

export function quarantineReplayCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'replay',
    "Check an app's quarantined events against its current plan: those that now pass are stored exactly " +
      'once (the dedup window applies) and leave the quarantine. Safe to run again, or while another runs.',
    [
      'tally quarantine replay --app 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c',
      'tally quarantine replay --app 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c --event Checkout.completed --json',
    ],
    '{ "replayed", "duplicates", "stillRejected" }',
  )
    .requiredOption('--app <appId>', 'the app', uuid)
    .option('--event <eventName>', 'only this event name')
    .option('--code <code>', `only this code (${CODES.join(', ')})`, code)
    .action(async (options) => {
      const services = await rt.services('plans');
      await services.apps.assertExist([options.app]);
      const result = await services
        .plans()
        .replay.replay(options.app, { eventName: options.event, code: options.code }, cliActor());
      const text = `${result.replayed} replayed, ${result.duplicates} duplicates, ${result.stillRejected} still rejected.`;
      rt.print({ json: result, text }, options.json);
    });
}
