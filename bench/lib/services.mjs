// The CLI's services in this process, built by Nest from the compiled code exactly as the CLI
// builds them, so that a rollup computation is timed without process start-up in the figure.
import path from 'node:path';
import { createRequire } from 'node:module';

export async function openServices(dist, databaseUrl) {
  const require = createRequire(path.join(dist, 'src', 'main.js'));
  require('reflect-metadata');
  const { NestFactory } = require('@nestjs/core');
  const { loadConfig } = require(path.join(dist, 'src/config/config.js'));
  const { CliModule } = require(path.join(dist, 'src/cli/cli.module.js'));
  const { RollupsService } = require(path.join(dist, 'src/rollups/rollups.service.js'));
  const { KeysService } = require(path.join(dist, 'src/auth/keys.service.js'));
  const config = { ...loadConfig({ DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' }), rollupsEnabled: false };
  const ctx = await NestFactory.createApplicationContext(CliModule.forRoot(config), {
    logger: false,
    abortOnError: false,
  });
  const rollups = ctx.get(RollupsService);
  const keys = ctx.get(KeysService);
  return {
    createIngestKey: (appId) => keys.createIngestKey(appId, 'live', 'bench'),
    createApiKey: (appId, scopes) => keys.createApiKey([appId], scopes, null, 'bench'),
    /** The CLI's `rollups compute`. */
    compute: (options) => rollups.compute(options),
    /** One scheduled run: the days marked dirty by ingest. */
    run: () => rollups.run(),
    close: () => ctx.close(),
  };
}
