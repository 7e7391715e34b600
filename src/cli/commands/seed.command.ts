import { cliActor } from '@app/cli/actor';
import { defineJsonCommand } from '@app/cli/command';
import type { CliRuntime } from '@app/cli/runtime';

const DEMO_APP = 'Demo app';

export function seedCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'seed',
    `Make the demo app ("${DEMO_APP}") on the first run, reuse it after, and give it new live and test ingest keys and a read API key.`,
    [
      'tally seed',
      `eval "$(tally seed --json | jq -r '"APP_ID=\\(.app.id) LIVE_KEY=\\(.ingestKeys.live) API_KEY=\\(.apiKey)"')"`,
    ],
    '{ "app": { "id", "name", "createdAt" }, "appCreated", "ingestKeys": { "live", "test" }, "apiKey" }',
  ).action(async (options) => {
    const { apps, keys } = await rt.services();
    const actor = cliActor();
    const existing = (await apps.list()).find((a) => a.name === DEMO_APP);
    const app = existing ?? (await apps.create(DEMO_APP, actor));
    const live = await keys.createIngestKey(app.id, 'live', 'demo live', actor);
    const test = await keys.createIngestKey(app.id, 'test', 'demo test', actor);
    const api = await keys.createApiKey([app.id], ['events:read', 'rollups:read'], null, 'demo read', actor);
    rt.print(
      {
        json: { app, appCreated: !existing, ingestKeys: { live: live.key, test: test.key }, apiKey: api.key },
        text: [
          existing
            ? `Demo app ${app.id} (already there: reused; its earlier keys still work)`
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
