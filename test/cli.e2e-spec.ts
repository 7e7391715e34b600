import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import request from 'supertest';
import { loadConfig } from '@app/config/config';
import { KeyVerifier } from '@app/auth/key-verifier';
import { runCli } from '@app/cli/main';
import { UUID } from '@app/common/ids';
import { DAY_MS } from '@app/common/time';
import { bearer, postIngest } from './factories';
import { testEnv, useTestApp } from './support/test-app';
import { expectFailureStdout, runTestCli, type CliRun } from './support/run-cli';

const exec = promisify(execFile);
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

type Run = CliRun;
const cli = runTestCli;

function expectUsageError(run: Run, pattern: RegExp) {
  expect(run.code).toBe(2);
  expectFailureStdout(run);
  expect(run.stderr).toMatch(pattern);
  expect(run.stderr.trim().split('\n')).toHaveLength(1);
}

function expectRefused(run: Run, pattern: RegExp) {
  expect(run.code).toBe(3);
  expectFailureStdout(run);
  expect(run.stderr).toMatch(pattern);
  expect(run.stderr.trim().split('\n')).toHaveLength(1);
}

/**
 * Two apps and one API key on both, with both read scopes and an expiry in 30 days; `before` is
 * the time just before the key was made.
 */
async function twoAppReadKey(names: [string, string], ...options: string[]) {
  const a = (await cli('apps', 'create', '--name', names[0], '--json')).json;
  const b = (await cli('apps', 'create', '--name', names[1], '--json')).json;
  const scopes = ['--scope', 'events:read', '--scope', 'rollups:read', '--expires-in-days', '30'];
  const before = Date.now();
  const run = await cli('keys', 'create-api', '--app', a.id, '--app', b.id, ...scopes, ...options, '--json');
  return { a, b, run, before };
}

/** The key expires `days` days after it was made, give or take a second. */
function expectExpiresIn(expiresAt: string, days: number, before: number): void {
  const expires = Date.parse(expiresAt);
  expect(expires).toBeGreaterThanOrEqual(before + days * DAY_MS - 1000);
  expect(expires).toBeLessThanOrEqual(Date.now() + days * DAY_MS + 1000);
}

describe('admin CLI: JSON documents and exit codes', () => {
  // No key cache, so that an expiry set by the CLI is seen by the server at once.
  const t = useTestApp({ KEY_CACHE_TTL_MS: '0' });

  const countApps = async () => Number((await t.db.query('SELECT count(*) AS n FROM apps'))[0].n);
  const countKeys = async () => Number((await t.db.query('SELECT count(*) AS n FROM keys'))[0].n);

  it('apps create and apps list', async () => {
    const created = await cli('apps', 'create', '--name', 'Shop', '--json');
    expect(created.code).toBe(0);
    expect(created.json).toEqual({
      id: expect.stringMatching(UUID),
      name: 'Shop',
      timezone: 'UTC',
      dimensions: [],
      createdAt: expect.stringMatching(ISO),
    });
    const listed = await cli('apps', 'list', '--json');
    expect(listed.json).toEqual(expect.arrayContaining([created.json]));
    for (const app of listed.json)
      expect(Object.keys(app).sort()).toEqual(['createdAt', 'dimensions', 'id', 'name', 'timezone']);
  });

  it('keys create-ingest issues working live and test keys', async () => {
    const app = (await cli('apps', 'create', '--name', 'Ingest', '--json')).json;
    const live = await cli('keys', 'create-ingest', '--app', app.id, '--json');
    expect(live.json).toEqual({
      id: expect.stringMatching(UUID),
      key: expect.stringMatching(/^tly_live_[0-9A-Za-z]{49}$/),
      appId: app.id,
      expiresAt: null,
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
      expiresAt: null,
      mode: 'test',
    });
    const res = await postIngest(t.http, live.json.key, { events: [{ eventName: 'App.opened' }] });
    expect(res.status).toBe(200);
  });

  it('keys create-api issues a scoped key for several apps, with an expiry', async () => {
    const { a, b, run, before } = await twoAppReadKey(['A', 'B']);
    expect(run.json).toEqual({
      id: expect.stringMatching(UUID),
      key: expect.stringMatching(/^tly_api_[0-9A-Za-z]{49}$/),
      appIds: [a.id, b.id],
      scopes: ['events:read', 'rollups:read'],
      expiresAt: expect.stringMatching(ISO),
    });
    expectExpiresIn(run.json.expiresAt, 30, before);
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
      unused: false,
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
        name: 'Demo app',
        timezone: 'UTC',
        dimensions: [],
        createdAt: expect.stringMatching(ISO),
      },
      appCreated: expect.any(Boolean),
      ingestKeys: {
        live: expect.stringMatching(/^tly_live_/),
        test: expect.stringMatching(/^tly_test_/),
      },
      apiKey: expect.stringMatching(/^tly_api_/),
      revokedKeys: expect.any(Number),
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

  it('seed run again reuses the demo app and says so, with new keys', async () => {
    const first = await cli('seed', '--json');
    const apps = await countApps();
    const again = await cli('seed');
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(new RegExp(`^Demo app ${first.json.app.id} \\(already there: reused`));
    const third = await cli('seed', '--json');
    expect(third.json).toMatchObject({ app: first.json.app, appCreated: false, revokedKeys: 3 });
    expect(third.json.ingestKeys.live).not.toBe(first.json.ingestKeys.live);
    expect(await countApps()).toBe(apps);
    // Only the newest demo keys work: seeding twice never leaves two active demo read keys.
    const keys = (await cli('keys', 'list', '--app', first.json.app.id, '--json')).json as {
      name: string | null;
      revokedAt: string | null;
    }[];
    const active = keys.filter((k) => k.name?.startsWith('demo ') && k.revokedAt === null);
    expect(active.map((k) => k.name).sort()).toEqual(['demo live', 'demo read', 'demo test']);
    const old = await postIngest(t.http, first.json.ingestKeys.live, { events: [{ eventName: 'Old.key' }] });
    expect(old.status).toBe(401);
  });

  it('keys take a life (--expires-in 90d), and keys list flags an active key unused for 30 days', async () => {
    const app = (await cli('apps', 'create', '--name', 'Lives', '--json')).json;
    const before = Date.now();
    const ingest = await cli('keys', 'create-ingest', '--app', app.id, '--expires-in', '90d', '--json');
    const expires = Date.parse(ingest.json.expiresAt as string);
    expect(expires - before).toBeGreaterThanOrEqual(90 * DAY_MS - 1000);
    expect(expires - Date.now()).toBeLessThanOrEqual(90 * DAY_MS);
    const api = await cli(
      'keys',
      'create-api',
      '--app',
      app.id,
      '--scope',
      'events:read',
      '--expires-in',
      '7d',
      '--json',
    );
    expect(Date.parse(api.json.expiresAt as string) - before).toBeGreaterThanOrEqual(7 * DAY_MS - 1000);
    for (const bad of ['0d', '90', '3651d', 'soon']) {
      expectUsageError(
        await cli('keys', 'create-ingest', '--app', app.id, '--expires-in', bad, '--json'),
        /a life in days such as 90d/,
      );
    }
    const old = (await cli('keys', 'create-ingest', '--app', app.id, '--json')).json;
    await t.db.query(`UPDATE keys SET created_at = now() - interval '31 days' WHERE id = $1`, [old.id]);
    const used = (await cli('keys', 'create-ingest', '--app', app.id, '--json')).json;
    await t.db.query(
      `UPDATE keys SET created_at = now() - interval '90 days', last_used_at = now() - interval '2 days' WHERE id = $1`,
      [used.id],
    );
    const listed = await cli('keys', 'list', '--app', app.id, '--json');
    const byId = Object.fromEntries(
      listed.json.map((k: { id: string; unused: boolean }) => [k.id, k.unused]),
    );
    expect(byId).toEqual({ [ingest.json.id]: false, [api.json.id]: false, [old.id]: true, [used.id]: false });
    const text = await cli('keys', 'list', '--app', app.id);
    expect(text.stdout).toMatch(new RegExp(`${old.id} .*active, unused 30d\\+`));
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

  it('a blank app name is a usage error (exit 2), and writes nothing', async () => {
    const apps = await countApps();
    expectUsageError(
      await cli('apps', 'create', '--name', '   ', '--json'),
      /An app name is 1 to 200 characters/,
    );
    expect(await countApps()).toBe(apps);
  });

  it('a blank app name is refused before the database is opened', async () => {
    let stderr = '';
    const unreachable = loadConfig(testEnv({ DATABASE_URL: 'postgres://tally@127.0.0.1:1/none' }));
    const code = await runCli(
      ['apps', 'create', '--name', '   '],
      { stdout: () => undefined, stderr: (t) => (stderr += t) },
      unreachable,
    );
    expect({ code, stderr }).toEqual({
      code: 2,
      stderr: expect.stringMatching(
        /^tally: option '--name <name>' argument ' ' is invalid\. An app name is 1 to 200 characters\./,
      ),
    });
  });

  it.each([
    [['keys', 'create-ingest', '--app', '00000000-0000-4000-8000-000000000000', '--json'], /No such app/],
    [['keys', 'revoke', '00000000-0000-4000-8000-000000000000', '--json'], /No such key/],
    [['keys', 'rotate', '00000000-0000-4000-8000-000000000000', '--json'], /No such key/],
  ])('%j names nothing: exit 3, one line on stderr, nothing written', async (argv, pattern) => {
    const apps = await countApps();
    const keys = await countKeys();
    expectRefused(await cli(...argv), pattern);
    expect(await countApps()).toBe(apps);
    expect(await countKeys()).toBe(keys);
  });

  it('the built binary prints one JSON document and exits 2 on bad arguments', async () => {
    const bin = path.resolve(__dirname, '../dist/src/cli/main.js');
    const env = { ...process.env, DATABASE_URL: t.config.databaseUrl! };
    const ok = await exec(process.execPath, [bin, 'apps', 'create', '--name', 'From bin', '--json'], { env });
    expect(JSON.parse(ok.stdout)).toEqual(expect.objectContaining({ name: 'From bin' }));
    const message = "required option '--name <name>' not specified (see 'tally apps create --help')";
    const failed = await exec(process.execPath, [bin, 'apps', 'create', '--json'], { env }).catch(
      (err: { code: number; stdout: string; stderr: string }) => err,
    );
    expect(failed).toMatchObject({ code: 2, stderr: `tally: ${message}\n` });
    expect(JSON.parse((failed as { stdout: string }).stdout)).toEqual({ error: { code: 'usage', message } });
  });

  it('rollups compute through the bin prints only its JSON document, with Nest quiet', async () => {
    const app = (await cli('apps', 'create', '--name', 'Computed', '--json')).json;
    const key = (await cli('keys', 'create-ingest', '--app', app.id, '--json')).json;
    const sent = await postIngest(t.http, key.key, {
      events: [{ eventName: 'App.opened', anonymousUserId: 'u-1' }],
    });
    expect(sent.status).toBe(200);
    const today = new Date().toISOString().slice(0, 10);
    const bin = path.resolve(__dirname, '../dist/src/cli/main.js');
    const env = { ...process.env, DATABASE_URL: t.config.databaseUrl!, LOG_LEVEL: 'info' };
    const args = ['rollups', 'compute', '--app', app.id, '--from', today, '--to', today, '--json'];
    const { stdout, stderr } = await exec(process.execPath, [bin, ...args], { env });
    // Two rows: every event, and App.opened.
    expect(JSON.parse(stdout)).toEqual({ days: 1, rows: 2 });
    expect(stderr).toBe('');
  });
});

describe('tally keys list and keys rotate', () => {
  const t = useTestApp({ KEY_CACHE_TTL_MS: '0' });

  const countKeys = async () => Number((await t.db.query('SELECT count(*) AS n FROM keys'))[0].n);
  const readEvents = (appId: string, key: string) =>
    request(t.http).get('/api/v1/events').query({ appId, limit: 1 }).set(bearer(key));
  const ingest = (key: string) => postIngest(t.http, key, { events: [{ eventName: 'App.opened' }] });

  it('keys list without --json is a table with last use and expiry', async () => {
    const app = (await cli('apps', 'create', '--name', 'Table', '--json')).json;
    const used = (await cli('keys', 'create-api', '--app', app.id, '--scope', 'events:read', '--json')).json;
    const expiring = (
      await cli('keys', 'create-api', '--app', app.id, '--scope', 'rollups:read', '--expires-in-days', '30')
    ).code;
    expect(expiring).toBe(0);
    expect((await readEvents(app.id, used.key)).status).toBe(200);
    await t.app.get(KeyVerifier).flushLastUsed();
    const run = await cli('keys', 'list', '--app', app.id);
    expect(run).toMatchObject({ code: 0, stderr: '' });
    const [header, ...rows] = run.stdout.trimEnd().split('\n');
    expect(header.split(/\s{2,}/)).toEqual([
      'ID',
      'KIND',
      'KEY',
      'NAME',
      'APPS',
      'SCOPES',
      'LAST USED (UTC)',
      'EXPIRES (UTC)',
      'STATUS',
    ]);
    expect(rows).toHaveLength(2);
    const usedRow = rows.find((r) => r.startsWith(used.id))!;
    expect(usedRow).toMatch(
      /tly_api_…\w{4} +- +\S+ +events:read +\d{4}-\d{2}-\d{2} \d{2}:\d{2} \(\d+(s|min) ago\) +never +active$/,
    );
    const expiringRow = rows.find((r) => !r.startsWith(used.id))!;
    expect(expiringRow).toMatch(/rollups:read +never +\d{4}-\d{2}-\d{2} \d{2}:\d{2} \(in 30d\) +active$/);
    expect(run.stdout).not.toContain(used.key);
  });

  it('rotate replaces an API key: the new key works, the old one until the grace period ends', async () => {
    const { a, b, run: created } = await twoAppReadKey(['Rotate A', 'Rotate B'], '--name', 'reporting');
    const old = created.json;
    const before = Date.now();
    const run = await cli('keys', 'rotate', old.id, '--grace-days', '2', '--json');
    expect(run.code).toBe(0);
    expect(run.json).toEqual({
      old: { id: old.id, expiresAt: expect.stringMatching(ISO) },
      new: { id: expect.stringMatching(UUID), key: expect.stringMatching(/^tly_api_[0-9A-Za-z]{49}$/) },
    });
    const oldExpiry = Date.parse(run.json.old.expiresAt);
    expect(oldExpiry).toBeGreaterThanOrEqual(before + 2 * DAY_MS);
    expect(oldExpiry).toBeLessThanOrEqual(Date.now() + 2 * DAY_MS);
    // Within the grace period both keys read both apps.
    for (const key of [old.key, run.json.new.key]) {
      for (const app of [a, b]) expect((await readEvents(app.id, key)).status).toBe(200);
    }
    await t.app.get(KeyVerifier).flushLastUsed();
    const listed = Object.fromEntries(
      (await cli('keys', 'list', '--app', a.id, '--json')).json.map((k: { id: string }) => [k.id, k]),
    );
    expect(listed[run.json.new.id]).toEqual({
      ...listed[old.id],
      id: run.json.new.id,
      mask: `tly_api_…${run.json.new.key.slice(-4)}`,
      createdAt: expect.stringMatching(ISO),
      lastUsedAt: expect.stringMatching(ISO),
      // The replacement keeps the old key's lifetime (30 days), counted from the rotation.
      expiresAt: expect.stringMatching(ISO),
    });
    expect(listed[old.id].expiresAt).toBe(run.json.old.expiresAt);
    expectExpiresIn(listed[run.json.new.id].expiresAt, 30, before);
    // After the grace period the old key is refused and the new one still works.
    await t.db.query('UPDATE keys SET expires_at = now() WHERE id = $1', [old.id]);
    const refused = await readEvents(a.id, old.key);
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe('invalid_key');
    expect((await readEvents(a.id, run.json.new.key)).status).toBe(200);
  });

  it('rotate replaces an ingest key with one of the same mode, app and name', async () => {
    const app = (await cli('apps', 'create', '--name', 'Rotate ingest', '--json')).json;
    const old = (
      await cli('keys', 'create-ingest', '--app', app.id, '--mode', 'test', '--name', 'ci', '--json')
    ).json;
    const run = await cli('keys', 'rotate', old.id, '--json');
    expect(run.code).toBe(0);
    expect(run.json.new.key).toMatch(/^tly_test_/);
    // The default grace period is 7 days.
    const expiry = Date.parse(run.json.old.expiresAt);
    expect(expiry).toBeGreaterThan(Date.now() + 7 * DAY_MS - 60_000);
    expect(expiry).toBeLessThanOrEqual(Date.now() + 7 * DAY_MS);
    const listed = (await cli('keys', 'list', '--app', app.id, '--json')).json;
    expect(listed.find((k: { id: string }) => k.id === run.json.new.id)).toMatchObject({
      kind: 'ingest',
      mode: 'test',
      name: 'ci',
      appIds: [app.id],
      scopes: [],
      expiresAt: null,
    });
    expect((await ingest(old.key)).status).toBe(200);
    expect((await ingest(run.json.new.key)).status).toBe(200);
  });

  it('rotate --grace-days 0 retires the old key at once, which then cannot be rotated again', async () => {
    const app = (await cli('apps', 'create', '--name', 'Rotate now', '--json')).json;
    const old = (await cli('keys', 'create-ingest', '--app', app.id, '--json')).json;
    const run = await cli('keys', 'rotate', old.id, '--grace-days', '0', '--json');
    expect(run.code).toBe(0);
    expect(Date.parse(run.json.old.expiresAt)).toBeLessThanOrEqual(Date.now());
    const refused = await ingest(old.key);
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe('invalid_key');
    expect((await ingest(run.json.new.key)).status).toBe(200);
    const keys = await countKeys();
    expectRefused(
      await cli('keys', 'rotate', old.id, '--json'),
      /^tally: Key \S+ has expired; issue a new key instead\.\n$/,
    );
    expect(await countKeys()).toBe(keys);
  });

  it('rotating a revoked key is refused (exit 3) and writes nothing', async () => {
    const app = (await cli('apps', 'create', '--name', 'Rotate revoked', '--json')).json;
    const key = (await cli('keys', 'create-api', '--app', app.id, '--scope', 'events:read', '--json')).json;
    expect((await cli('keys', 'revoke', key.id, '--json')).code).toBe(0);
    const keys = await countKeys();
    expectRefused(
      await cli('keys', 'rotate', key.id),
      /^tally: Key \S+ is revoked; issue a new key instead\.\n$/,
    );
    expect(await countKeys()).toBe(keys);
    const [row] = await t.db.query('SELECT expires_at FROM keys WHERE id = $1', [key.id]);
    expect(row.expires_at).toBeNull();
  });

  it('a rotation that fails halfway leaves the old key as it was', async () => {
    const app = (await cli('apps', 'create', '--name', 'Rotate atomic', '--json')).json;
    const key = (await cli('keys', 'create-ingest', '--app', app.id, '--json')).json;
    const keys = await countKeys();
    // A trigger that refuses the replacement's insert, after the old key's expiry was set.
    await t.db.query(`CREATE FUNCTION refuse_key() RETURNS trigger LANGUAGE plpgsql AS
      $$ BEGIN RAISE EXCEPTION 'refused for the test'; END $$`);
    await t.db.query(
      `CREATE TRIGGER refuse_key BEFORE INSERT ON keys FOR EACH ROW EXECUTE FUNCTION refuse_key()`,
    );
    try {
      const run = await cli('keys', 'rotate', key.id, '--json');
      expect(run.code).toBe(1);
      expectFailureStdout(run, 'failed');
      expect(run.stderr).toMatch(/^tally: .*refused for the test/);
    } finally {
      await t.db.query('DROP TRIGGER refuse_key ON keys');
      await t.db.query('DROP FUNCTION refuse_key()');
    }
    expect(await countKeys()).toBe(keys);
    const [row] = await t.db.query('SELECT expires_at FROM keys WHERE id = $1', [key.id]);
    expect(row.expires_at).toBeNull();
  });
});
