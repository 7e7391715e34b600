import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Client } from 'pg';
import { loadConfig } from '@app/config/config';
import { runCli } from '@app/cli/main';
import { createDataSource } from '@app/database/data-source';
import { latestSchemaVersion } from '@app/database/backup/manifest';
import { testEnv } from './support/test-app';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

async function cli(env: Record<string, string>, ...argv: string[]): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(
    argv,
    { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) },
    loadConfig(testEnv(env)),
  );
  const json: unknown = argv.includes('--json') && code === 0 ? JSON.parse(stdout) : undefined;
  return { code, stdout, stderr, json };
}

const manifest = (over: Record<string, unknown>) => ({
  createdAt: new Date().toISOString(),
  tallyVersion: '0.1.0',
  schemaVersion: latestSchemaVersion(),
  postgresVersion: '18.4',
  format: 'pg_dump-directory',
  bytes: 0,
  ...over,
});

describe('tally backup and tally restore: refusals', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'tally-backup-cli-'));
    expect((await cli({}, 'migrate')).code).toBe(0);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('refuses a --out folder that is not empty, and leaves it as it is', async () => {
    const out = path.join(dir, 'full');
    await mkdir(out);
    await writeFile(path.join(out, 'keep.txt'), 'mine');
    const run = await cli({}, 'backup', '--out', out, '--json');
    const message = `${out} is not empty: a backup goes into a new or empty folder`;
    expect(run).toEqual(expect.objectContaining({ code: 2, stderr: `tally: ${message}\n` }));
    // With --json the refusal is also the one JSON document on stdout.
    expect(JSON.parse(run.stdout)).toEqual({ error: { code: 'usage', message } });
    expect(await readdir(out)).toEqual(['keep.txt']);
  });

  it('refuses a folder that is not a backup', async () => {
    const run = await cli({}, 'restore', '--from', dir, '--json');
    expect(run.code).toBe(2);
    expect(JSON.parse(run.stdout)).toEqual({
      error: { code: 'usage', message: `${dir} holds no manifest.json: not a Tally backup` },
    });
    expect(run.stderr).toBe(`tally: ${dir} holds no manifest.json: not a Tally backup\n`);
  });

  it('refuses a backup of a newer schema before looking at the target', async () => {
    const newer = path.join(dir, 'newer');
    await mkdir(newer);
    await writeFile(
      path.join(newer, 'manifest.json'),
      JSON.stringify(manifest({ schemaVersion: 9_999_999_999_999, tallyVersion: '9.0.0' })),
    );
    const run = await cli({}, 'restore', '--from', newer);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(
      `tally: the backup's schema (9999999999999) is newer than this Tally's (${latestSchemaVersion()}), made by Tally 9.0.0: restore it with that version or a newer one\n`,
    );
  });

  it('refuses a target database that is not empty, and changes nothing in it', async () => {
    const dump = path.join(dir, 'dump');
    await mkdir(dump);
    await writeFile(path.join(dump, 'manifest.json'), JSON.stringify(manifest({})));
    const run = await cli({}, 'restore', '--from', dump, '--json');
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^tally: postgres:\/\/.* is not empty; nothing restored\n$/);
    expect(run.stderr).not.toContain(':tally@');
  });

  it('names both versions when the installed pg_dump is older than the server, and leaves no folder', async () => {
    const out = path.join(dir, 'too-old-tools');
    const run = await cli({}, 'backup', '--out', out);
    if (run.code === 0) return; // pg_dump of the test server's version is installed here
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      /^tally: pg_dump \d+ is the newest installed, and it cannot work with PostgreSQL \d+: install the client tools of PostgreSQL \d+ or later\n$/,
    );
    expect((await readdir(dir)).filter((n) => n.startsWith('too-old-tools'))).toEqual([]);
  });

  it('refuses a physical backup for a DATABASE_URL target', async () => {
    const physical = path.join(dir, 'physical');
    await mkdir(physical);
    await writeFile(path.join(physical, 'manifest.json'), JSON.stringify(manifest({ format: 'physical' })));
    const run = await cli({}, 'restore', '--from', physical);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('restore it into an embedded one (unset DATABASE_URL)');
  });
});

// The machine's own PostgreSQL (CI's multi-instance tests use it too): an external DATABASE_URL
// backed up with pg_dump --format=directory --jobs and restored with pg_restore.
const ADMIN_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

async function adminClient(): Promise<Client | null> {
  const client = new Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 2_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return client;
  } catch {
    return null;
  }
}

describe('tally backup and tally restore of an external DATABASE_URL (pg_dump)', () => {
  let admin: Client | null;
  let dir: string;
  const source = `tally_backup_src_${randomUUID().slice(0, 8)}`;
  const target = `tally_backup_dst_${randomUUID().slice(0, 8)}`;
  const urlOf = (db: string) => ADMIN_URL.replace(/\/postgres$/, `/${db}`);

  beforeAll(async () => {
    admin = await adminClient();
    dir = await mkdtemp(path.join(tmpdir(), 'tally-backup-pg-'));
    if (!admin) return;
    await admin.query(`CREATE DATABASE ${source}`);
    await admin.query(`CREATE DATABASE ${target}`);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
    if (!admin) return;
    for (const db of [source, target]) await admin.query(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
    await admin.end();
  });

  it('backs up an older schema, restores it into an empty database, migrates it, and refuses a second restore', async () => {
    if (!admin) return console.warn('no PostgreSQL at 127.0.0.1:5432: external backup test skipped');
    const env = { DATABASE_URL: urlOf(source) };
    expect((await cli(env, 'seed', '--json')).code).toBe(0);
    // The source lags one migration behind this build.
    const ds = createDataSource({ url: urlOf(source), poolSize: 1 });
    await ds.initialize();
    await ds.undoLastMigration({ transaction: 'each' });
    await ds.destroy();

    const out = path.join(dir, 'b');
    const backup = await cli({ ...env, MIGRATIONS_RUN: 'false' }, 'backup', '--out', out, '--json');
    expect(backup.stderr).toBe('');
    expect(backup.code).toBe(0);
    expect(backup.json).toEqual({
      out,
      createdAt: expect.any(String),
      tallyVersion: '0.1.0',
      schemaVersion: expect.any(Number),
      postgresVersion: expect.stringMatching(/^\d+\.\d+/),
      format: 'pg_dump-directory',
      bytes: expect.any(Number),
      seconds: expect.any(Number),
    });
    expect(backup.json.schemaVersion).toBeLessThan(latestSchemaVersion());
    expect(JSON.parse(await readFile(path.join(out, 'manifest.json'), 'utf8'))).toEqual(
      expect.objectContaining({ format: 'pg_dump-directory', schemaVersion: backup.json.schemaVersion }),
    );

    const restoreEnv = { DATABASE_URL: urlOf(target) };
    const restored = await cli(restoreEnv, 'restore', '--from', out, '--json');
    expect(restored.stderr).toBe('');
    expect(restored.code).toBe(0);
    expect(restored.json).toEqual(
      expect.objectContaining({
        from: out,
        apps: 1,
        events: 0,
        deletions: 0,
        migrationsApplied: [expect.stringMatching(/\d{13}$/)],
        ledger: { entries: 0, reapplied: [], unknownApp: [], skippedLines: 0 },
      }),
    );
    const apps = await cli(restoreEnv, 'apps', 'list', '--json');
    expect(apps.json).toEqual([expect.objectContaining({ name: 'Demo app' })]);

    const again = await cli(restoreEnv, 'restore', '--from', out);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/is not empty; nothing restored\n$/);
    expect((await cli(restoreEnv, 'apps', 'list', '--json')).json).toEqual(apps.json);
  });
});
