import { ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { freePort } from './support/harness';

const exec = promisify(execFile);
const ROOT = path.resolve(__dirname, '..');
const MAIN = path.join(ROOT, 'dist/src/main.js');
const CLI = path.join(ROOT, 'dist/src/cli/main.js');

/** This process's environment with the embedded cluster in `dir` on a free port, and no DATABASE_URL. */
async function embeddedEnv(dir: string): Promise<NodeJS.ProcessEnv> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    EMBEDDED_PG_DIR: dir,
    EMBEDDED_PG_PORT: String(await freePort()),
    LOG_LEVEL: 'warn',
  };
  delete env.DATABASE_URL;
  return env;
}

/** Runs `node src/database/embedded-pg.mjs <command> <dir> [port]`, whatever it answers. */
async function embeddedPg(command: 'ensure' | 'stop' | 'destroy', dir: string, port?: string): Promise<void> {
  const args = [path.join(ROOT, 'src/database/embedded-pg.mjs'), command, dir, ...(port ? [port] : [])];
  await exec(process.execPath, args).catch(() => undefined);
}

function postmasterAlive(dir: string): boolean {
  const file = path.join(dir, 'pg', 'postmaster.pid');
  if (!existsSync(file)) return false;
  const pid = Number(readFileSync(file, 'utf8').split('\n')[0]);
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * The embedded database as a newcomer meets it: DATABASE_URL unset, data in a folder, the
 * server and the CLI sharing one cluster whichever of them started it.
 */
describe('embedded PostgreSQL shared by the server and the CLI', () => {
  let dir: string;
  let env: NodeJS.ProcessEnv;
  const servers: ChildProcess[] = [];

  beforeAll(async () => {
    dir = path.join(os.tmpdir(), `tally-embedded-${randomUUID().slice(0, 8)}`);
    await fs.mkdir(dir, { mode: 0o755 });
    env = await embeddedEnv(dir);
  });

  afterAll(async () => {
    for (const s of servers) if (s.exitCode === null) s.kill('SIGKILL');
    await embeddedPg('stop', dir);
    await fs.rm(dir, { recursive: true, force: true });
  });

  // Run from another folder than the installation's, as from a PATH: the folder does not matter.
  const cli = async (...args: string[]) =>
    JSON.parse((await exec(process.execPath, [CLI, ...args], { env, cwd: os.tmpdir() })).stdout);

  async function startServer(): Promise<{ child: ChildProcess; url: string }> {
    const port = await freePort();
    const child = spawn(process.execPath, [MAIN], {
      env: { ...env, PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    servers.push(child);
    await new Promise<void>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`server did not start: ${out}`)), 90_000);
      child.stdout!.on('data', (d) => {
        out += d;
        if (out.includes('Tally listening on')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.stderr!.on('data', (d) => (out += d));
      child.on('exit', (code) => reject(new Error(`server exited ${code}: ${out}`)));
    });
    return { child, url: `http://127.0.0.1:${port}` };
  }

  async function stopServer(child: ChildProcess): Promise<number | null> {
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    return exited;
  }

  it('the CLI refuses a fresh folder and creates nothing; once the service made the cluster, the CLI starts it and stops it when done', async () => {
    const refused = await exec(process.execPath, [CLI, 'seed', '--json'], { env, cwd: os.tmpdir() }).catch(
      (err: { code: number; stdout: string }) => err,
    );
    expect(refused).toMatchObject({ code: 2 });
    expect(JSON.parse((refused as { stdout: string }).stdout)).toMatchObject({
      error: { code: 'database_missing', message: expect.stringContaining(dir) },
    });
    expect(await fs.readdir(dir)).toEqual([]);
    const server = await startServer();
    // Ready (its shutdown hooks in place), then stopped as an operator stops it.
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
    expect(await stopServer(server.child)).toBe(0);
    expect(postmasterAlive(dir)).toBe(false);
    const seed = await cli('seed', '--json');
    expect(seed.app.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(existsSync(path.join(dir, 'pg', 'PG_VERSION'))).toBe(true);
    expect(postmasterAlive(dir)).toBe(false);
  }, 180_000);

  it('the CLI works while a server runs, two servers share the folder, and the last one out stops it', async () => {
    const first = await startServer();
    const app = await cli('apps', 'create', '--name', 'while-running', '--json');
    const key = await cli('keys', 'create-api', '--app', app.id, '--scope', 'events:read', '--json');
    // The CLI left, but the server still holds the cluster.
    expect(postmasterAlive(dir)).toBe(true);
    if (process.platform === 'linux') {
      // The cluster runs with the malloc settings that keep its backends' freed heap.
      const pid = readFileSync(path.join(dir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0];
      const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      expect(environ).toEqual(
        expect.arrayContaining([
          'MALLOC_TRIM_THRESHOLD_=67108864',
          'MALLOC_TOP_PAD_=8388608',
          'MALLOC_MMAP_THRESHOLD_=33554432',
        ]),
      );
    }
    let res = await fetch(`${first.url}/api/v1/events?appId=${app.id}`, {
      headers: { Authorization: `Bearer ${key.key}` },
    });
    expect(res.status).toBe(200);

    const second = await startServer();
    res = await fetch(`${second.url}/api/v1/events?appId=${app.id}`, {
      headers: { Authorization: `Bearer ${key.key}` },
    });
    expect(res.status).toBe(200);

    expect(await stopServer(first.child)).toBe(0);
    expect(postmasterAlive(dir)).toBe(true);
    res = await fetch(`${second.url}/api/v1/events?appId=${app.id}`, {
      headers: { Authorization: `Bearer ${key.key}` },
    });
    expect(res.status).toBe(200);
    expect(await stopServer(second.child)).toBe(0);
    expect(postmasterAlive(dir)).toBe(false);

    // The data survived every start and stop.
    const apps = await cli('apps', 'list', '--json');
    expect(apps.map((a: { id: string }) => a.id)).toContain(app.id);
  }, 180_000);
});

/** Modes of `dir` and every folder above it. */
async function ancestorModes(dir: string): Promise<Record<string, number>> {
  const modes: Record<string, number> = {};
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    modes[d] = (await fs.stat(d)).mode & 0o7777;
    if (d === path.dirname(d)) return modes;
  }
}

/**
 * A checkout or data folder that others cannot traverse, such as a clone in a mode-700 home: as
 * root the cluster cannot live there (PostgreSQL runs as `postgres`), and no folder's
 * permissions may change to make it fit.
 */
describe('embedded PostgreSQL under a folder others cannot traverse', () => {
  let parent: string;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  const root = process.getuid?.() === 0;

  beforeAll(async () => {
    parent = path.join(os.tmpdir(), `tally-private-${randomUUID().slice(0, 8)}`);
    await fs.mkdir(parent, { mode: 0o700 });
    dir = path.join(parent, 'data');
    env = await embeddedEnv(dir);
  });

  afterAll(async () => {
    await embeddedPg('destroy', dir);
    await fs.rm(parent, { recursive: true, force: true });
  });

  it('works without changing the permissions of any folder', async () => {
    const before = { ...(await ancestorModes(parent)), ...(await ancestorModes(ROOT)) };
    // The cluster is made as the service makes it (the CLI never makes one), then left stopped.
    await embeddedPg('ensure', dir, env.EMBEDDED_PG_PORT);
    await embeddedPg('stop', dir);
    const seed = JSON.parse((await exec(process.execPath, [CLI, 'seed', '--json'], { env })).stdout);
    expect(seed.app.id).toMatch(/^[0-9a-f-]{36}$/);
    const after = { ...(await ancestorModes(parent)), ...(await ancestorModes(ROOT)) };
    expect(after).toEqual(before);
    expect(after[parent]).toBe(0o700);

    const pointer = path.join(dir, 'cluster-location');
    if (root) {
      // The cluster went where `postgres` can reach it, and the data folder says where.
      const home = readFileSync(pointer, 'utf8').trim();
      expect(home).toMatch(/^\/var\/lib\/tally\/clusters\/[0-9a-f]{16}$/);
      expect(existsSync(path.join(home, 'pg', 'PG_VERSION'))).toBe(true);
    } else {
      expect(existsSync(pointer)).toBe(false);
      expect(existsSync(path.join(dir, 'pg', 'PG_VERSION'))).toBe(true);
    }
    // The same cluster again: the data is still there.
    const apps = JSON.parse((await exec(process.execPath, [CLI, 'apps', 'list', '--json'], { env })).stdout);
    expect(apps.map((a: { id: string }) => a.id)).toContain(seed.app.id);
  }, 180_000);
});
