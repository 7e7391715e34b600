// The CLI's services in this process, built from the compiled code exactly as the CLI builds
// them, so that a rollup computation is timed without process start-up in the figure.
import path from 'node:path';
import { createRequire } from 'node:module';

export async function openServices(dist, databaseUrl) {
  const require = createRequire(path.join(dist, 'src', 'main.js'));
  require('reflect-metadata');
  const { loadConfig } = require(path.join(dist, 'src/config/config.js'));
  const { openServices: open } = require(path.join(dist, 'src/cli/services.js'));
  const config = { ...loadConfig({ DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' }), rollupsEnabled: false };
  const services = await open(config, ['rollups']);
  const rollups = services.rollups();
  const keys = services.keys;
  const actor = { type: 'cli', osUser: 'bench' };
  return {
    createIngestKey: (appId) => keys.createIngestKey(appId, 'live', 'bench', actor),
    createApiKey: (appId, scopes) => keys.createApiKey([appId], scopes, null, 'bench', actor),
    /** The CLI's `rollups compute`. */
    compute: (options) => rollups.compute(options),
    /** One scheduled run: the days marked dirty by ingest. */
    run: () => rollups.run(),
    close: () => services.close(),
  };
}
