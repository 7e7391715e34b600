import { uuid } from '@app/cli/arguments';
import { cliActor } from '@app/cli/actor';
import { defineJsonCommand } from '@app/cli/command';
import type { CliRuntime } from '@app/cli/runtime';

export function keysRevokeCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'revoke',
    'Revoke a key at once. Revoking a revoked key changes nothing.',
    ['tally keys revoke 6d1f0c9a-3b2e-4f51-8c7d-9e0a1b2c3d4e'],
    '{ "id", "revokedAt" }',
  )
    .argument('<keyId>', 'the id of the key (see tally keys list)', uuid)
    .action(async (keyId, options) => {
      const { keys } = await rt.services();
      const result = await keys.revoke(keyId, cliActor());
      rt.print(
        {
          json: result,
          text: `Revoked key ${result.id} at ${result.revokedAt}. Every instance refuses it within 30 s.`,
        },
        options.json,
      );
    });
}
