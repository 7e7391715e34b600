import 'reflect-metadata';
import { ConfigError, loadConfigFromProcess } from './config/config';
import { prepareDatabase } from './database/prepare';
import { createApp } from './app.factory';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfigFromProcess();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  const database = await prepareDatabase(config);
  const app = await createApp(database.config);
  const server = await app.listen(config.port, config.host);
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const where = config.databaseUrl ? 'DATABASE_URL' : `embedded PostgreSQL in ${config.embeddedPgDir}`;
  process.stdout.write(`Tally listening on http://localhost:${port} (database: ${where})\n`);

  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    const timer = setTimeout(() => {
      process.stderr.write(`shutdown took longer than ${config.shutdownTimeoutMs} ms, exiting\n`);
      process.exit(1);
    }, config.shutdownTimeoutMs);
    timer.unref();
    process.stdout.write(`${signal} received, draining\n`);
    await app.close();
    await database.release();
    process.exit(0);
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((err) => {
  process.stderr.write(
    `Tally failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
});
