import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import * as path from 'node:path';
import { promisify } from 'node:util';
import type { Client } from 'pg';
import { connectClient } from './pg-client';

const run = promisify(execFile);
const PRESENCE_APP_NAME = 'tally-presence';

export interface EmbeddedDatabase {
  url: string;
  /** Leaves the shared cluster; stops it when no other Tally process is attached. */
  release(): Promise<void>;
}

const SCRIPT = path.join(__dirname, 'embedded-pg.mjs');
// The role, password and database that embedded-pg.mjs creates (its PG_USER, PG_PASSWORD, PG_DATABASE).
const CLUSTER_CREDENTIALS = 'tally:tally';
const CLUSTER_DATABASE = 'tally';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The URL of the cluster that already runs in `dir`, from PostgreSQL's lock file; null when none does. */
async function runningClusterUrl(dir: string): Promise<string | null> {
  let lines: string[];
  try {
    lines = (await readFile(path.join(path.resolve(dir), 'pg', 'postmaster.pid'), 'utf8')).split('\n');
  } catch {
    return null;
  }
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!pid || !port || !alive(pid)) return null;
  return `postgres://${CLUSTER_CREDENTIALS}@127.0.0.1:${port}/${CLUSTER_DATABASE}`;
}

/** No embedded cluster was found where one was looked for, and the caller may not create one. */
export class EmbeddedClusterMissing extends Error {
  override readonly name = 'EmbeddedClusterMissing';

  constructor(readonly dir: string) {
    super(
      `No Tally database in ${dir} (the embedded PostgreSQL of this installation; EMBEDDED_PG_DIR ` +
        'names another folder). Start the service once (npm start) to create it, or set DATABASE_URL.',
    );
  }
}

/** Whether `dir` holds an initialised cluster, where embedded-pg.mjs put it (see its clusterDir). */
async function clusterExists(dir: string): Promise<boolean> {
  const root = path.resolve(dir);
  let home = root;
  try {
    home = (await readFile(path.join(root, 'cluster-location'), 'utf8')).trim();
  } catch {
    // No pointer: the cluster, if any, lives in the folder itself.
  }
  return existsSync(path.join(home, 'pg', 'PG_VERSION'));
}

function connectPresence(url: string): Promise<Client> {
  return connectClient({ connectionString: url, application_name: PRESENCE_APP_NAME });
}

/**
 * Attaches to the embedded PostgreSQL in `dir`, starting it when none runs. With `create: false`
 * (the CLI) a folder without a cluster is refused with EmbeddedClusterMissing: only the service
 * creates one, so that a command run with the wrong folder never answers from a new, empty one.
 *
 * Each attached process holds one idle "presence" connection. On release, the process that
 * finds no other presence connection stops the cluster, so the database lives exactly as long
 * as some server or CLI uses it, whichever of them started it.
 */
export async function attachEmbeddedDatabase(
  dir: string,
  port: number,
  { create = true }: { create?: boolean } = {},
): Promise<EmbeddedDatabase> {
  // Most often a server already runs the cluster: then attaching costs one connection instead of
  // a helper process (a Node start), which matters to the CLI. The helper handles everything else.
  let url = await runningClusterUrl(dir);
  let presence = url ? await connectPresence(url).catch(() => null) : null;
  if (!url || !presence) {
    if (!create && !(await clusterExists(dir))) throw new EmbeddedClusterMissing(path.resolve(dir));
    const { stdout } = await run(process.execPath, [SCRIPT, 'ensure', dir, String(port)], {
      timeout: 120_000,
    });
    url = (JSON.parse(stdout) as { url: string }).url;
    presence = await connectPresence(url);
  }

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
