import { uuid } from '@app/cli/arguments';
import { cliActor } from '@app/cli/actor';
import { defineJsonCommand } from '@app/cli/command';
import type { CliRuntime } from '@app/cli/runtime';

export function appsSetDimensionsCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'set-dimensions',
    "Declare the payload keys an app's breakdowns keep (GET /api/v1/breakdown?by=payload.<key>), at most 10; " +
      'none clears them. The retained days are recomputed by the next rollup run.',
    [
      'tally apps set-dimensions 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c plan country',
      'tally apps set-dimensions 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c --json',
    ],
    '{ "appId", "dimensions", "previousDimensions", "recomputeFrom" }',
  )
    .argument('<appId>', 'the app', uuid)
    .argument('[keys...]', 'payload keys, 1 to 128 characters each')
    .action(async (appId: string, keys: string[], options: { json?: boolean }) => {
      const { dimensions } = await rt.services();
      const change = await dimensions.set(appId, keys ?? [], cliActor());
      const list = change.dimensions.length ? change.dimensions.join(', ') : 'none';
      const text =
        `Dimensions of ${change.appId}: ${list}.` +
        (change.recomputeFrom ? `\nBreakdowns from ${change.recomputeFrom} on are recomputed.` : '');
      rt.print({ json: change, text }, options.json);
    });
}
