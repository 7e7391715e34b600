import { DEFAULT_ROTATION_GRACE_DAYS, MAX_ROTATION_GRACE_DAYS } from '@app/auth/key-rotation';
import { uuid, wholeNumber } from '@app/cli/arguments';
import { cliActor } from '@app/cli/actor';
import { defineJsonCommand } from '@app/cli/command';
import type { CliRuntime } from '@app/cli/runtime';

export function keysRotateCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'rotate',
    'Issue a replacement for a key (same kind, mode, name, apps and scopes) and let the old key work ' +
      'until the grace period ends, so that clients can move over. A revoked or expired key cannot be rotated.',
    [
      'tally keys rotate 6d1f0c9a-3b2e-4f51-8c7d-9e0a1b2c3d4e',
      'tally keys rotate 6d1f0c9a-3b2e-4f51-8c7d-9e0a1b2c3d4e --grace-days 1 --json',
    ],
    '{ "old": { "id", "expiresAt" }, "new": { "id", "key" } }',
  )
    .argument('<keyId>', 'the id of the key to replace (see tally keys list)', uuid)
    .option(
      '--grace-days <n>',
      `days the old key keeps working, 0 to ${MAX_ROTATION_GRACE_DAYS}`,
      wholeNumber(0, MAX_ROTATION_GRACE_DAYS),
      DEFAULT_ROTATION_GRACE_DAYS,
    )
    .action(async (keyId, options) => {
      const { keys } = await rt.services();
      const rotation = await keys.rotate(keyId, cliActor(), options.graceDays);
      rt.print(
        {
          json: rotation,
          text: [
            `Key ${rotation.old.id} works until ${rotation.old.expiresAt}.`,
            `Its replacement is key ${rotation.new.id}. Store it now; it is not shown again:`,
            rotation.new.key,
          ].join('\n'),
        },
        options.json,
      );
    });
}
