import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import type { AddressInfo } from 'node:net';
import type { CommandUnknownOpts } from '@commander-js/extra-typings';
import { installationRoot, loadConfig } from '@app/config/config';
import { buildProgram } from '@app/cli/program';
import { CliRuntime } from '@app/cli/runtime';
import { runCli } from '@app/cli/main';
import { testDatabaseUrl, testEnv, useTestApp } from './support/test-app';

const exec = promisify(execFile);
const ROOT = path.resolve(__dirname, '..');
const CLI = path.join(ROOT, 'dist', 'src', 'cli', 'main.js');
const NOBODY = '00000000-0000-4000-8000-000000000000';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function cli(argv: string[], env: Record<string, string> = {}): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(
    argv,
    { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) },
    loadConfig(testEnv(env)),
  );
  return { code, stdout, stderr };
}

/** Every command of the tree that runs something (the leaves), as its words. */
function leafCommands(): string[] {
  const rt = new CliRuntime({ stdout: () => undefined, stderr: () => undefined });
  const out: string[] = [];
  const walk = (command: CommandUnknownOpts, words: string[]) => {
    if (command.commands.length === 0) out.push(words.join(' '));
    for (const sub of command.commands) walk(sub, [...words, sub.name()]);
  };
  walk(buildProgram(rt), []);
  return out.sort();
}

/** Parses stdout as exactly one JSON document; fails the test otherwise. */
function oneDocument(run: Run): Record<string, unknown> {
  const parsed = JSON.parse(run.stdout) as Record<string, unknown>;
  expect(typeof parsed).toBe('object');
  return parsed;
}

describe('every CLI command keeps the --json promise', () => {
  const t = useTestApp();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tally-cli-json-'));
  let appId = '';
  let keyId = '';
  let rotated = '';
  let doomed = '';
  // `ok: null`: the command's success is covered where its setup lives (backup and restore need a
  // PostgreSQL whose pg_dump is installed, and an empty target: test/backup-cli.e2e-spec.ts).
  let cases: Record<string, { ok: string[] | null; fail: string[]; failCode: number }> = {};

  beforeAll(async () => {
    appId = (
      JSON.parse((await cli(['apps', 'create', '--name', 'json-app', '--json'])).stdout) as { id: string }
    ).id;
    const key = JSON.parse((await cli(['keys', 'create-ingest', '--app', appId, '--json'])).stdout) as {
      id: string;
    };
    keyId = key.id;
    doomed = (
      JSON.parse((await cli(['apps', 'create', '--name', 'doomed', '--json'])).stdout) as { id: string }
    ).id;
    rotated = (
      JSON.parse((await cli(['keys', 'create-ingest', '--app', appId, '--json'])).stdout) as { id: string }
    ).id;
    const plan = path.join(dir, 'plan.json');
    fs.writeFileSync(plan, JSON.stringify({ mode: 'flag', events: {} }));
    const events = path.join(dir, 'events.ndjson');
    fs.writeFileSync(events, JSON.stringify({ eventName: 'Json.ok' }) + '\n');
    const out = path.join(dir, 'export.ndjson');
    const app = ['--app', appId];
    cases = {
      'apps create': { ok: ['--name', 'another'], fail: ['--name', ''], failCode: 2 },
      'apps list': { ok: [], fail: ['--bogus'], failCode: 2 },
      'apps rename': { ok: [appId, 'json-app renamed'], fail: [NOBODY, 'x'], failCode: 3 },
      'apps delete': { ok: [doomed, '--yes'], fail: [appId], failCode: 2 },
      'apps set-timezone': { ok: [appId, 'Europe/Berlin'], fail: [NOBODY, 'UTC'], failCode: 3 },
      'apps set-dimensions': { ok: [appId, 'plan'], fail: [NOBODY, 'plan'], failCode: 3 },
      'keys create-ingest': { ok: app, fail: ['--app', NOBODY], failCode: 3 },
      'keys create-api': {
        ok: [...app, '--scope', 'events:read'],
        fail: ['--app', NOBODY, '--scope', 'events:read'],
        failCode: 3,
      },
      'keys list': { ok: [], fail: ['--app', 'not-a-uuid'], failCode: 2 },
      'keys revoke': { ok: [keyId], fail: [NOBODY], failCode: 3 },
      'keys rotate': { ok: [rotated], fail: [NOBODY], failCode: 3 },
      'rollups compute': { ok: app, fail: ['--from', '2026-02-30'], failCode: 2 },
      'plans get': { ok: app, fail: [], failCode: 2 },
      'plans set': {
        ok: [...app, '--file', plan],
        fail: [...app, '--file', plan, '--if-match', '0'],
        failCode: 3,
      },
      'plans check': {
        ok: [...app, '--file', events],
        fail: [...app, '--file', path.join(dir, 'none')],
        failCode: 2,
      },
      'quarantine list': { ok: app, fail: [...app, '--limit', '0'], failCode: 2 },
      'quarantine replay': { ok: app, fail: [...app, '--code', 'nope'], failCode: 2 },
      'audit list': { ok: app, fail: ['--app', 'x'], failCode: 2 },
      'users delete': {
        ok: [...app, '--user', 'u-1', '--no-suppress'],
        fail: ['--app', NOBODY, '--user', 'u'],
        failCode: 3,
      },
      'suppressions list': { ok: app, fail: [], failCode: 2 },
      'suppressions remove': {
        ok: [...app, '--user', 'u-9'],
        fail: ['--app', NOBODY, '--user', 'u'],
        failCode: 3,
      },
      export: {
        ok: [...app, '--from', '0', '--out', out],
        fail: [...app, '--from', 'yesterday'],
        failCode: 2,
      },
      seed: { ok: [], fail: ['--bogus'], failCode: 2 },
      migrate: { ok: [], fail: ['extra'], failCode: 2 },
      status: { ok: [], fail: ['--bogus'], failCode: 2 },
      completion: { ok: ['bash'], fail: ['fish'], failCode: 2 },
      backup: { ok: null, fail: ['--out', dir], failCode: 2 },
      restore: { ok: null, fail: ['--from', dir], failCode: 2 },
    };
  });

  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('covers every command of the tree', () => {
    expect(Object.keys(cases).sort()).toEqual(leafCommands());
  });

  it('prints one JSON document for each command that succeeds', async () => {
    for (const [command, c] of Object.entries(cases)) {
      if (c.ok === null) continue;
      const run = await cli([...command.split(' '), ...c.ok, '--json']);
      if (run.code !== 0) throw new Error(`${command}: exit ${run.code}: ${run.stderr}`);
      const doc = oneDocument(run);
      expect(doc.error).toBeUndefined();
    }
  });

  it('prints one { error: { code, message } } document, with the documented exit code, for each that fails', async () => {
    for (const [command, c] of Object.entries(cases)) {
      const run = await cli([...command.split(' '), ...c.fail, '--json']);
      expect({ command, code: run.code }).toEqual({ command, code: c.failCode });
      const doc = oneDocument(run);
      expect({ command, doc }).toEqual({
        command,
        doc: { error: { code: expect.any(String), message: expect.any(String) } },
      });
      // The same line is on stderr for a person.
      expect(run.stderr).toMatch(/^tally: /);
    }
  });

  it('reports a stale --if-match as refused (3), not as an unreachable database', async () => {
    const plan = path.join(dir, 'stale.json');
    fs.writeFileSync(plan, JSON.stringify({ mode: 'off', events: {} }));
    expect((await cli(['plans', 'set', '--app', appId, '--file', plan, '--json'])).code).toBe(0);
    const run = await cli(['plans', 'set', '--app', appId, '--file', plan, '--if-match', '0', '--json']);
    expect(run.code).toBe(3);
    expect(JSON.parse(run.stdout)).toEqual({
      error: { code: 'version_conflict', message: expect.any(String) },
    });
  });

  it('status names the database without its password, the schema version and the service', async () => {
    const listening = t.http.listen(0, '127.0.0.1');
    await new Promise((resolve) => listening.once('listening', resolve));
    try {
      const port = String((listening.address() as AddressInfo).port);
      const up = await cli(['status', '--json'], { PORT: port, HOST: '127.0.0.1' });
      expect(up.code).toBe(0);
      const doc = oneDocument(up);
      const url = new URL(testDatabaseUrl());
      url.password = '';
      expect(doc).toEqual({ database: url.toString(), schemaVersion: expect.any(Number), service: 'up' });
      expect(String(doc.database)).not.toContain(':tally@');
    } finally {
      await new Promise((resolve) => listening.close(resolve));
    }
    const down = await cli(['status', '--json'], { PORT: '1', HOST: '127.0.0.1' });
    expect(oneDocument(down)).toMatchObject({ service: 'down' });
  });
});

describe('the CLI finds its installation, and never creates a database', () => {
  it('resolves the embedded database from the installation, whatever the current directory', () => {
    const before = process.cwd();
    const elsewhere = fs.mkdtempSync(path.join(os.tmpdir(), 'tally-cwd-'));
    try {
      process.chdir(elsewhere);
      expect(installationRoot()).toBe(ROOT);
      expect(loadConfig({}).embeddedPgDir).toBe(path.join(ROOT, '.data'));
      // The erasure ledger too: a restore run from any folder re-applies the same one.
      expect(loadConfig({}).erasureLedgerPath).toBe(path.join(ROOT, '.data', 'erasure-ledger.ndjson'));
      // A copy of the installation elsewhere resolves to itself.
      const copy = path.join(elsewhere, 'install');
      fs.mkdirSync(path.join(copy, 'dist', 'src', 'config'), { recursive: true });
      fs.writeFileSync(path.join(copy, 'package.json'), JSON.stringify({ name: 'tally' }));
      expect(installationRoot(path.join(copy, 'dist', 'src', 'config'))).toBe(copy);
    } finally {
      process.chdir(before);
      fs.rmSync(elsewhere, { recursive: true, force: true });
    }
  });

  it('refuses with exit 2, says where it looked, and creates nothing when no cluster is there', async () => {
    const elsewhere = fs.mkdtempSync(path.join(os.tmpdir(), 'tally-cwd-'));
    const empty = path.join(elsewhere, 'data');
    try {
      const env: NodeJS.ProcessEnv = {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        EMBEDDED_PG_DIR: empty,
      };
      for (const args of [
        ['apps', 'list', '--json'],
        ['status', '--json'],
        ['migrate', '--json'],
      ]) {
        const run = await exec(process.execPath, [CLI, ...args], { cwd: elsewhere, env }).then(
          (r) => ({ code: 0, ...r }),
          (e: { code: number; stdout: string; stderr: string }) => e,
        );
        expect(run.code).toBe(2);
        const doc = JSON.parse(run.stdout) as { error: { code: string; message: string } };
        expect(doc.error.code).toBe('database_missing');
        expect(doc.error.message).toContain(empty);
        expect(run.stderr).toContain('Start the service once');
      }
      expect(fs.readdirSync(elsewhere)).toEqual([]);
    } finally {
      fs.rmSync(elsewhere, { recursive: true, force: true });
    }
  });
});
