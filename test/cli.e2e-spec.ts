import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import request from 'supertest';
import { loadConfig } from '@app/config/config';
import { runCli } from '@app/cli/main';
import { bearer } from './factories';
import { testEnv, useTestApp } from './support/test-app';

const exec = promisify(execFile);
import { UUID } from '@app/common/ids';
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

async function cli(...argv: string[]): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(
    argv,
    { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) },
    loadConfig(testEnv()),
  );
  let json: unknown = undefined;
  if (code === 0 && argv.includes('--json')) json = JSON.parse(stdout);
  return { code, stdout, stderr, json };
}

function expectUsageError(run: Run, pattern: RegExp) {
  expect(run.code).toBe(2);
  expect(run.stdout).toBe('');
  expect(run.stderr).toMatch(pattern);
  expect(run.stderr.trim().split('\n')).toHaveLength(1);
}

describe('admin CLI', () => {
  const t = useTestApp();
  const countApps = async () => Number((await t.db.query('SELECT count(*) AS n FROM apps'))[0].n);
  const countKeys = async () => Number((await t.db.query('SELECT count(*) AS n FROM keys'))[0].n);

  it('apps create and apps list', async () => {
    const created = await cli('apps', 'create', '--name', 'Shop', '--json');
    expect(created.code).toBe(0);
    expect(created.json).toEqual({
      id: expect.stringMatching(UUID),
      name: 'Shop',
      createdAt: expect.stringMatching(ISO),
    });
    const listed = await cli('apps', 'list', '--json');
    expect(listed.json).toEqual(expect.arrayContaining([created.json]));
    for (const app of listed.json) expect(Object.keys(app).sort()).toEqual(['createdAt', 'id', 'name']);
  });

  it('keys create-ingest issues working live and test keys', async () => {
    const app = (await cli('apps', 'create', '--name', 'Ingest', '--json')).json;
    const live = await cli('keys', 'create-ingest', '--app', app.id, '--json');
    expect(live.json).toEqual({
      id: expect.stringMatching(UUID),
      key: expect.stringMatching(/^tly_live_[0-9A-Za-z]{49}$/),
      appId: app.id,
      mode: 'live',
    });
    const test = await cli(
      'keys',
      'create-ingest',
      '--app',
      app.id,
      '--mode',
      'test',
      '--name',
      'ci',
      '--json',
    );
    expect(test.json).toEqual({
      id: expect.stringMatching(UUID),
      key: expect.stringMatching(/^tly_test_[0-9A-Za-z]{49}$/),
      appId: app.id,
      mode: 'test',
    });
    const res = await request(t.http)
      .post('/api/ingest')
      .set(bearer(live.json.key))
      .set('Content-Type', 'application/json')
      .send({ events: [{ eventName: 'App.opened' }] });
    expect(res.status).toBe(200);
  });

  it('keys create-api issues a scoped key for several apps, with an expiry', async () => {
    const a = (await cli('apps', 'create', '--name', 'A', '--json')).json;
    const b = (await cli('apps', 'create', '--name', 'B', '--json')).json;
    const before = Date.now();
    const run = await cli(
      'keys',
      'create-api',
      '--app',
      a.id,
      '--app',
      b.id,
      '--scope',
      'events:read',
      '--scope',
      'rollups:read',
      '--expires-in-days',
      '30',
      '--json',
    );
    expect(run.json).toEqual({
      id: expect.stringMatching(UUID),
      key: expect.stringMatching(/^tly_api_[0-9A-Za-z]{49}$/),
      appIds: [a.id, b.id],
      scopes: ['events:read', 'rollups:read'],
      expiresAt: expect.stringMatching(ISO),
    });
    const expires = Date.parse(run.json.expiresAt);
    expect(expires).toBeGreaterThanOrEqual(before + 30 * 86_400_000 - 1000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 30 * 86_400_000 + 1000);
    const noExpiry = await cli('keys', 'create-api', '--app', a.id, '--scope', 'events:read', '--json');
    expect(noExpiry.json.expiresAt).toBeNull();
    const res = await request(t.http).get('/api/v1/events').query({ appId: b.id }).set(bearer(run.json.key));
    expect(res.status).toBe(200);
  });

  it('keys list shows masks only, optionally for one app', async () => {
    const app = (await cli('apps', 'create', '--name', 'Listed', '--json')).json;
    const ingest = (await cli('keys', 'create-ingest', '--app', app.id, '--json')).json;
    const api = (await cli('keys', 'create-api', '--app', app.id, '--scope', 'events:read', '--json')).json;
    const run = await cli('keys', 'list', '--app', app.id, '--json');
    expect(run.code).toBe(0);
    expect(run.json).toHaveLength(2);
    expect(run.stdout).not.toContain(ingest.key);
    expect(run.stdout).not.toContain(api.key);
    const byId = Object.fromEntries(run.json.map((k: { id: string }) => [k.id, k]));
    expect(byId[ingest.id]).toEqual({
      id: ingest.id,
      kind: 'ingest',
      mask: `tly_live_…${ingest.key.slice(-4)}`,
      name: null,
      mode: 'live',
      appIds: [app.id],
      scopes: [],
      createdAt: expect.stringMatching(ISO),
      lastUsedAt: null,
      expiresAt: null,
      revokedAt: null,
    });
    expect(byId[api.id]).toEqual(
      expect.objectContaining({
        kind: 'api',
        mask: `tly_api_…${api.key.slice(-4)}`,
        scopes: ['events:read'],
      }),
    );
    const all = await cli('keys', 'list', '--json');
    expect(all.json.length).toBeGreaterThanOrEqual(2);
  });

  it('keys revoke stops the key', async () => {
    const app = (await cli('apps', 'create', '--name', 'Revoked', '--json')).json;
    const key = (await cli('keys', 'create-api', '--app', app.id, '--scope', 'events:read', '--json')).json;
    const run = await cli('keys', 'revoke', key.id, '--json');
    expect(run.json).toEqual({ id: key.id, revokedAt: expect.stringMatching(ISO) });
    const listed = (await cli('keys', 'list', '--app', app.id, '--json')).json;
    expect(listed[0].revokedAt).toBe(run.json.revokedAt);
    const res = await request(t.http).get('/api/v1/events').query({ appId: app.id }).set(bearer(key.key));
    expect(res.status).toBe(401);
    expect(res.body.code).toBe('invalid_key');
  });

  it('seed creates a demo app and working keys', async () => {
    const run = await cli('seed', '--json');
    expect(run.json).toEqual({
      app: {
        id: expect.stringMatching(UUID),
        name: expect.any(String),
        createdAt: expect.stringMatching(ISO),
      },
      ingestKeys: {
        live: expect.stringMatching(/^tly_live_/),
        test: expect.stringMatching(/^tly_test_/),
      },
      apiKey: expect.stringMatching(/^tly_api_/),
    });
    const events = await request(t.http)
      .get('/api/v1/events')
      .query({ appId: run.json.app.id })
      .set(bearer(run.json.apiKey));
    expect(events.status).toBe(200);
    const rollups = await request(t.http)
      .get('/api/v1/rollups')
      .query({ appId: run.json.app.id })
      .set(bearer(run.json.apiKey));
    expect(rollups.status).toBe(200);
  });

  it('rollups compute prints day and row counts', async () => {
    const run = await cli('rollups', 'compute', '--from', '2026-11-01', '--to', '2026-11-02', '--json');
    expect(run.code).toBe(0);
    expect(run.json).toEqual({ days: expect.any(Number), rows: expect.any(Number) });
  });

  it('migrate reports an up-to-date schema', async () => {
    const run = await cli('migrate', '--json');
    expect(run.code).toBe(0);
    expect(run.json).toEqual({ applied: [] });
  });

  it.each([
    [['nope'], /unknown command "nope"/],
    [['apps', 'create', '--json'], /--name is required/],
    [['apps', 'create', '--name', 'x', '--colour', 'red'], /Unknown option '--colour'/],
    [['keys', 'create-ingest', '--app', 'not-a-uuid', '--json'], /must be a UUID/],
    [['keys', 'create-ingest', '--app', '00000000-0000-4000-8000-000000000000', '--json'], /No such app/],
    [
      ['keys', 'create-ingest', '--app', '00000000-0000-4000-8000-000000000000', '--mode', 'prod'],
      /--mode must be live or test/,
    ],
    [['keys', 'create-api', '--scope', 'events:read'], /--app is required/],
    [['keys', 'revoke'], /expected 1 argument/],
    [['keys', 'revoke', '00000000-0000-4000-8000-000000000000', '--json'], /No such key/],
    [['rollups', 'compute', '--from', '2026-02-30'], /real date/],
    [['rollups', 'compute', '--from', '2026-03-02', '--to', '2026-03-01'], /must not be after/],
  ])('%j is a usage error (exit 2, one line, nothing written)', async (argv, pattern) => {
    const apps = await countApps();
    const keys = await countKeys();
    expectUsageError(await cli(...argv), pattern);
    expect(await countApps()).toBe(apps);
    expect(await countKeys()).toBe(keys);
  });

  it('refuses unknown scopes and bad expiry, writing nothing', async () => {
    const app = (await cli('apps', 'create', '--name', 'Scopes', '--json')).json;
    const keys = await countKeys();
    expectUsageError(
      await cli('keys', 'create-api', '--app', app.id, '--scope', 'events:write'),
      /Unknown scope: events:write/,
    );
    expectUsageError(
      await cli('keys', 'create-api', '--app', app.id, '--scope', 'events:read', '--expires-in-days', '0'),
      /--expires-in-days/,
    );
    expect(await countKeys()).toBe(keys);
  });

  it('the built binary prints one JSON document and exits 2 on bad arguments', async () => {
    const bin = path.resolve(__dirname, '../dist/src/cli/main.js');
    const env = { ...process.env, DATABASE_URL: t.config.databaseUrl! };
    const ok = await exec(process.execPath, [bin, 'apps', 'create', '--name', 'From bin', '--json'], { env });
    expect(JSON.parse(ok.stdout)).toEqual(expect.objectContaining({ name: 'From bin' }));
    await expect(exec(process.execPath, [bin, 'apps', 'create', '--json'], { env })).rejects.toMatchObject({
      code: 2,
      stdout: '',
      stderr: 'tally: --name is required\n',
    });
  });
});
