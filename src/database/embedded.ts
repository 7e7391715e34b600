import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';

const run = promisify(execFile);
const PRESENCE_APP_NAME = 'tally-presence';

export interface EmbeddedDatabase {
  url: string;
  /** Leaves the shared cluster; stops it when no other Tally process is attached. */
  release(): Promise<void>;
}

const SCRIPT = path.join(__dirname, 'embedded-pg.mjs');

/**
 * Attaches to the embedded PostgreSQL in `dir`, starting it when none runs.
 *
 * Each attached process holds one idle "presence" connection. On release, the process that
 * finds no other presence connection stops the cluster, so the database lives exactly as long
 * as some server or CLI uses it, whichever of them started it.
 */
export async function attachEmbeddedDatabase(dir: string, port: number): Promise<EmbeddedDatabase> {
  const { stdout } = await run(process.execPath, [SCRIPT, 'ensure', dir, String(port)], {
    timeout: 120_000,
  });
  const { url } = JSON.parse(stdout) as { url: string };
  const presence = new Client({ connectionString: url, application_name: PRESENCE_APP_NAME });
  presence.on('error', () => undefined);
  await presence.connect();

  let released = false;
  return {
    url,
    async release() {
      if (released) return;
      released = true;
      let others: number;
      try {
        const { rows } = await presence.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE application_name = $1 AND pid <> pg_backend_pid()`,
          [PRESENCE_APP_NAME],
        );
        others = rows[0].n;
      } catch {
        // The cluster is already gone or unreachable: nothing to stop.
        others = 1;
      }
      await presence.end().catch(() => undefined);
      if (others === 0) {
        await run(process.execPath, [SCRIPT, 'stop', dir], { timeout: 60_000 }).catch(() => undefined);
      }
    },
  };
}
