import { cliActor } from '@app/cli/actor';
import { defineJsonCommand } from '@app/cli/command';
import type { CliRuntime } from '@app/cli/runtime';

const DEMO_APP = 'Demo app';
const DEMO_KEY_NAMES = ['demo live', 'demo test', 'demo read'];

export function seedCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'seed',
    `Make the demo app ("${DEMO_APP}") on the first run, reuse it after, and give it new live and test ingest keys and a read API key; the demo keys an earlier seed issued are revoked.`,
    [
      'tally seed',
      `eval "$(tally seed --json | jq -r '"APP_ID=\\(.app.id) LIVE_KEY=\\(.ingestKeys.live) API_KEY=\\(.apiKey)"')"`,
    ],
    '{ "app": { "id", "name", "createdAt" }, "appCreated", "ingestKeys": { "live", "test" }, "apiKey", "revokedKeys" }',
  ).action(async (options) => {
    const { apps, keys } = await rt.services();
    const actor = cliActor();
    const existing = (await apps.list()).find((a) => a.name === DEMO_APP);
    const app = existing ?? (await apps.create(DEMO_APP, actor));
    // The demo keys seed issued before are revoked: running it again rotates them, never piles them up.
    const earlier = (await keys.list(app.id)).filter(
      (k) => DEMO_KEY_NAMES.includes(k.name ?? '') && k.revokedAt === null && k.appIds.length === 1,
    );
    for (const k of earlier) await keys.revoke(k.id, actor);
    const live = await keys.createIngestKey(app.id, 'live', 'demo live', actor);
    const test = await keys.createIngestKey(app.id, 'test', 'demo test', actor);
    const api = await keys.createApiKey([app.id], ['events:read', 'rollups:read'], null, 'demo read', actor);
    rt.print(
      {
        json: {
          app,
          appCreated: !existing,
          ingestKeys: { live: live.key, test: test.key },
          apiKey: api.key,
          revokedKeys: earlier.length,
        },
        text: [
          existing
            ? `Demo app ${app.id} (already there: reused; ${earlier.length} earlier demo key(s) revoked)`
            : `Demo app ${app.id} (made now)`,
          `live ingest key: ${live.key}`,
          `test ingest key: ${test.key}`,
          `API key:         ${api.key}`,
        ].join('\n'),
      },
      options.json,
    );
  });
}
