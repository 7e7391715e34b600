import { defineJsonCommand } from '@app/cli/command';
import type { CliRuntime } from '@app/cli/runtime';

/** How long the CLI waits for the service's health check before calling it down. */
const PROBE_TIMEOUT_MS = 1_000;

/** Whether a Tally service answers /healthz on this installation's address. */
async function serviceUp(host: string, port: number): Promise<boolean> {
  const address = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  try {
    const res = await fetch(`http://${address.includes(':') ? `[${address}]` : address}:${port}/healthz`, {
      signal: AbortSignal.timeout(PROBE_TIMEOUT_MS),
    });
    return res.ok;
  } catch {
    return false;
  }
}

export function statusCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'status',
    'Show which database the CLI uses, its schema version, and whether the service answers on PORT.',
    ['tally status', 'tally status --json'],
    '{ "database", "schemaVersion", "service": "up" | "down" }',
  ).action(async (options) => {
    const config = rt.config();
    const services = await rt.services();
    const [schemaVersion, up] = await Promise.all([
      services.schemaVersion(),
      serviceUp(config.host, config.port),
    ]);
    const service = up ? 'up' : 'down';
    rt.print(
      {
        json: { database: services.database, schemaVersion, service },
        text: [
          `database:       ${services.database}`,
          `schema version: ${schemaVersion ?? '(none)'}`,
          `service:        ${service} (http://${config.host}:${config.port})`,
        ].join('\n'),
      },
      options.json,
    );
  });
}
