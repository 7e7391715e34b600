import 'reflect-metadata';
import type { Server } from 'node:http';
import { ConfigError, loadConfigFromProcess } from './config/config';
import type { AppConfig } from './config/config';
import { prepareDatabase } from './database/prepare';
import { createApp } from './app.factory';
import { DrainState } from './ops/drain-state';

// Share of SHUTDOWN_TIMEOUT_MS given to in-flight requests; the rest is for the shutdown hooks
// (a rollup run finishing or abandoning), the pools and the embedded database.
const DRAIN_SHARE = 0.6;
const IDLE_SWEEP_MS = 100;

function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

/**
 * Stops accepting connections and waits until every open connection has ended. In-flight
 * requests finish normally; idle keep-alive sockets are closed as soon as they are idle, so that
 * a client holding one cannot keep the process alive. Past `deadlineMs` the rest are cut.
 */
function drainHttp(server: Server, deadlineMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    let settled = false;
    const finish = (drained: boolean) => {
      if (settled) return;
      settled = true;
      clearInterval(sweeper);
      clearTimeout(deadline);
      resolve(drained);
    };
    server.close(() => finish(true));
    server.closeIdleConnections();
    // A connection busy when close() ran becomes idle once its response is sent; sweep again.
    // eslint-disable-next-line no-restricted-globals -- part of the shutdown sequence, not background work.
    const sweeper = setInterval(() => server.closeIdleConnections(), IDLE_SWEEP_MS);
    const deadline = setTimeout(() => {
      server.closeAllConnections();
      finish(false);
    }, deadlineMs);
  });
}

async function main(): Promise<void> {
  let config: AppConfig;
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
  const server: Server = await app.listen(config.port, config.host);
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const where = config.databaseUrl ? 'DATABASE_URL' : `embedded PostgreSQL in ${config.embeddedPgDir}`;
  log(`Tally listening on http://localhost:${port} (database: ${where})`);

  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    const started = Date.now();
    const timer = setTimeout(() => {
      process.stderr.write(`shutdown took longer than ${config.shutdownTimeoutMs} ms, exiting\n`);
      process.exit(1);
    }, config.shutdownTimeoutMs);
    timer.unref();
    log(`${signal} received, draining`);
    try {
      app.get(DrainState).begin();
      const drained = await drainHttp(server, Math.floor(config.shutdownTimeoutMs * DRAIN_SHARE));
      if (!drained) process.stderr.write('in-flight requests did not finish in time; connections closed\n');
      // Shutdown hooks run here: the scheduler stops, a rollup run ends, the pools close.
      await app.close();
      await database.release();
    } catch (err) {
      process.stderr.write(`shutdown failed: ${err instanceof Error ? (err.stack ?? err.message) : err}\n`);
      process.exit(1);
    }
    log(`stopped in ${Date.now() - started} ms`);
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
