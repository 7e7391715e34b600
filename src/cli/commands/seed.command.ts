import { cliActor } from '@app/cli/actor';
import { defineJsonCommand } from '@app/cli/command';
import type { CliRuntime } from '@app/cli/runtime';

export function seedCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'seed',
    'Create a demo app with a live and a test ingest key and an API key with every scope.',
    [
      'tally seed',
      `eval "$(tally seed --json | jq -r '"APP_ID=\\(.app.id) LIVE_KEY=\\(.ingestKeys.live) API_KEY=\\(.apiKey)"')"`,
    ],
    '{ "app": { "id", "name", "createdAt" }, "ingestKeys": { "live", "test" }, "apiKey" }',
  ).action(async (options) => {
    const { apps, keys } = await rt.services();
    const actor = cliActor();
    const app = await apps.create('Demo app', actor);
    const live = await keys.createIngestKey(app.id, 'live', 'demo live', actor);
    const test = await keys.createIngestKey(app.id, 'test', 'demo test', actor);
    const api = await keys.createApiKey([app.id], ['events:read', 'rollups:read'], null, 'demo read', actor);
    rt.print(
      {
        json: { app, ingestKeys: { live: live.key, test: test.key }, apiKey: api.key },
        text: [
          `Demo app ${app.id}`,
          `live ingest key: ${live.key}`,
          `test ingest key: ${test.key}`,
          `API key:         ${api.key}`,
        ].join('\n'),
      },
      options.json,
    );
  });
}
