import { userInfo } from 'node:os';
import { loadConfig } from '@app/config/config';
import { runCli } from '@app/cli/main';
import { testEnv, useTestApp } from './support/test-app';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function cli(...argv: string[]): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(
    argv,
    { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) },
    loadConfig(testEnv()),
  );
  return { code, stdout, stderr };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function cliJson<T = any>(...argv: string[]): Promise<T> {
  const run = await cli(...argv, '--json');
  expect(run).toEqual(expect.objectContaining({ code: 0, stderr: '' }));
  return JSON.parse(run.stdout) as T;
}

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe('audit log', () => {
  const t = useTestApp();
  const osUser = userInfo().username;

  it('records app creation and key creation, rotation and revocation made at the CLI, with who and what', async () => {
    const app = await cliJson<{ id: string }>('apps', 'create', '--name', 'Audited');
    const ingest = await cliJson<{ id: string; key: string }>('keys', 'create-ingest', '--app', app.id);
    const api = await cliJson<{ id: string; key: string }>(
      'keys',
      'create-api',
      '--app',
      app.id,
      '--scope',
      'events:read',
      '--expires-in-days',
      '30',
    );
    const rotated = await cliJson<{ new: { id: string } }>('keys', 'rotate', ingest.id, '--grace-days', '1');
    await cliJson('keys', 'revoke', api.id);
    await cliJson('keys', 'revoke', api.id); // a second revocation changes nothing and is not recorded

    const entries = await cliJson<any[]>('audit', 'list', '--app', app.id); // eslint-disable-line @typescript-eslint/no-explicit-any
    const actor = { type: 'cli', osUser };
    expect(entries.map((e) => e.action)).toEqual([
      'app.created',
      'key.created',
      'key.created',
      'key.rotated',
      'key.revoked',
    ]);
    for (const e of entries) {
      expect(e).toEqual(
        expect.objectContaining({ actor, appId: app.id, id: expect.stringMatching(/^\d+$/) }),
      );
      expect(e.at).toMatch(ISO);
    }
    expect(entries[0]).toEqual(expect.objectContaining({ targetId: app.id, details: { name: 'Audited' } }));
    expect(entries[1]).toEqual(
      expect.objectContaining({
        targetId: ingest.id,
        details: { kind: 'ingest', mode: 'live', name: null, appIds: [app.id], scopes: [], expiresAt: null },
      }),
    );
    expect(entries[2].details).toEqual(
      expect.objectContaining({
        kind: 'api',
        scopes: ['events:read'],
        expiresAt: expect.stringMatching(ISO),
      }),
    );
    expect(entries[3]).toEqual(
      expect.objectContaining({
        targetId: ingest.id,
        details: { newKeyId: rotated.new.id, oldExpiresAt: expect.stringMatching(ISO) },
      }),
    );
    expect(entries[4]).toEqual(expect.objectContaining({ targetId: api.id, details: {} }));

    // No secret anywhere in the log.
    const raw = JSON.stringify(await t.db.query('SELECT * FROM audit_log'));
    for (const secret of [ingest.key, api.key]) expect(raw).not.toContain(secret.slice(9));
  });

  it('filters by --since and --limit, and prints a table for people', async () => {
    const app = await cliJson<{ id: string }>('apps', 'create', '--name', 'Later');
    const after = new Date(Date.now() + 60_000).toISOString();
    expect(await cliJson('audit', 'list', '--app', app.id, '--since', after)).toEqual([]);
    await cliJson('keys', 'create-ingest', '--app', app.id);
    const newest = await cliJson<{ action: string }[]>('audit', 'list', '--app', app.id, '--limit', '1');
    expect(newest.map((e) => e.action)).toEqual(['key.created']);

    const text = await cli('audit', 'list', '--app', app.id);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^AT \(UTC\)\s+ACTOR\s+ACTION\s+APP\s+TARGET\s+DETAILS\n/);
    expect(text.stdout).toContain(`cli ${osUser}`);
    expect(text.stdout).toContain('app.created');
  });

  it('refuses malformed filters as usage errors', async () => {
    for (const args of [
      ['--since', 'yesterday'],
      ['--since', '2026-02-30'],
      ['--app', 'not-a-uuid'],
      ['--limit', '0'],
    ]) {
      const run = await cli('audit', 'list', ...args);
      expect(run.code).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr).toMatch(/^tally: .*\(see 'tally audit list --help'\)\n$/);
    }
  });

  it('is append-only in the database: UPDATE, DELETE and TRUNCATE are refused', async () => {
    await cliJson('apps', 'create', '--name', 'Kept');
    const before = await t.db.query('SELECT count(*)::int AS n FROM audit_log');
    await expect(t.db.query(`UPDATE audit_log SET action = 'key.created'`)).rejects.toThrow(
      /audit_log is append-only: UPDATE refused/,
    );
    await expect(t.db.query(`DELETE FROM audit_log`)).rejects.toThrow(
      /audit_log is append-only: DELETE refused/,
    );
    await expect(t.db.query(`TRUNCATE audit_log`)).rejects.toThrow(
      /audit_log is append-only: TRUNCATE refused/,
    );
    expect(await t.db.query('SELECT count(*)::int AS n FROM audit_log')).toEqual(before);
  });

  it('writes nothing when the action fails', async () => {
    const before = await t.db.query('SELECT count(*)::int AS n FROM audit_log');
    const run = await cli('keys', 'revoke', '6d1f0c9a-3b2e-4f51-8c7d-9e0a1b2c3d4e');
    expect(run.code).toBe(3);
    expect(await t.db.query('SELECT count(*)::int AS n FROM audit_log')).toEqual(before);
  });
});
