import { execFile } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { KNOWN_SCOPES } from '@app/auth/scopes';
import { runCli } from '@app/cli/main';

const exec = promisify(execFile);
const ROOT = path.resolve(__dirname, '..');
const BIN = path.join(ROOT, 'dist/src/cli/main.js');

const COMMANDS = [
  ['apps', 'create'],
  ['apps', 'list'],
  ['keys', 'create-ingest'],
  ['keys', 'create-api'],
  ['keys', 'list'],
  ['keys', 'revoke'],
  ['keys', 'rotate'],
  ['rollups', 'compute'],
  ['users', 'delete'],
  ['suppressions', 'list'],
  ['suppressions', 'remove'],
  ['export'],
  ['seed'],
  ['migrate'],
  ['completion'],
];

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

// None of these command lines reaches the database, so no configuration is passed.
async function cli(...argv: string[]): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) });
  return { code, stdout, stderr };
}

function expectUsageLine(run: Run, pattern: RegExp) {
  expect(run.code).toBe(2);
  // With --json the usage error is also the one JSON document on stdout.
  if (run.stdout !== '') {
    expect(JSON.parse(run.stdout)).toEqual({
      error: { code: 'usage', message: expect.stringMatching(pattern) },
    });
  }
  expect(run.stderr).toMatch(pattern);
  expect(run.stderr.endsWith('\n')).toBe(true);
  expect(run.stderr.trim().split('\n')).toHaveLength(1);
}

describe('admin CLI help and usage errors', () => {
  it.each(COMMANDS.map((words): [string, string, string[]] => [words.join(' '), words.join(' '), words]))(
    '`%s --help` prints that command’s own help with an example, and `help %s` the same',
    async (name, _again, words) => {
      const run = await cli(...words, '--help');
      expect(run).toMatchObject({ code: 0, stderr: '' });
      expect(run.stdout).toContain(`Usage: tally ${name} `);
      expect(run.stdout).toMatch(/\nExamples?:\n {2}\$ tally /);
      if (name !== 'completion') expect(run.stdout).toMatch(/--json[\s\S]*\nWith --json:\n {2}[[{]/);
      expect(await cli('help', ...words)).toEqual(run);
    },
  );

  it('the help of each command differs from the global help', async () => {
    const global = (await cli('--help')).stdout;
    const rotate = (await cli('keys', 'rotate', '--help')).stdout;
    const createApi = (await cli('keys', 'create-api', '--help')).stdout;
    expect(new Set([global, rotate, createApi]).size).toBe(3);
    expect(rotate).toContain('--grace-days <n>');
    expect(rotate).toContain('(default: 7)');
  });

  it('lists the scope values and the ingest modes', async () => {
    const createApi = (await cli('help', 'keys', 'create-api')).stdout;
    for (const scope of KNOWN_SCOPES) expect(createApi).toContain(scope);
    expect((await cli('help', 'keys', 'create-ingest')).stdout).toMatch(/choices: "live", "test"/);
  });

  it('global help lists every group and command, and the exit codes', async () => {
    const run = await cli('--help');
    expect(run.code).toBe(0);
    for (const word of ['apps', 'keys', 'rollups', 'seed', 'migrate', 'completion', 'help [command...]']) {
      expect(run.stdout).toContain(`  ${word}`);
    }
    expect(run.stdout).toMatch(/Exit codes:\n {2}0 .*\n {2}1 .*\n {2}2 .*\n {2}3 /);
    expect(await cli('help')).toEqual(run);
  });

  it('no arguments at all prints the global help on stderr and exits 2', async () => {
    const run = await cli();
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe((await cli('--help')).stdout);
  });

  it.each([
    ['apps', ['create', 'list']],
    ['keys', ['create-ingest', 'create-api', 'list', 'revoke', 'rotate']],
    ['rollups', ['compute']],
    ['users', ['delete']],
    ['suppressions', ['list', 'remove']],
  ])(
    'a group without a command (`%s`) prints the group’s help on stderr and exits 2',
    async (group, subs) => {
      const run = await cli(group);
      expect(run.code).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr).toContain(`Usage: tally ${group} `);
      for (const sub of subs) expect(run.stderr).toMatch(new RegExp(`\\n {2}${sub} `));
      expect((await cli(group, '--help')).stdout).toBe(run.stderr);
    },
  );

  it.each([
    [['nope'], /^tally: unknown command 'nope' \(see 'tally --help'\)$/m],
    [
      ['apps', 'creat'],
      /^tally: unknown command 'creat' \(did you mean create\?\) \(see 'tally apps --help'\)$/m,
    ],
    [
      ['keys', 'create'],
      /^tally: unknown command 'create' \(did you mean create-ingest or create-api\?\) \(see 'tally keys --help'\)$/m,
    ],
    [['help', 'keys', 'nope'], /^tally: unknown command 'nope' of 'tally keys'/],
    [['apps', 'create', '--name', 'x', '--colour', 'red'], /^tally: unknown option '--colour'/],
    [['apps', 'list', '--jsn'], /unknown option '--jsn' \(did you mean --json\?\)/],
    [['apps', 'create', '--json'], /required option '--name <name>' not specified/],
    [
      ['keys', 'create-ingest', '--app', 'not-a-uuid'],
      /option '--app <appId>' argument 'not-a-uuid' is invalid/,
    ],
    [
      ['keys', 'create-ingest', '--app', '00000000-0000-4000-8000-000000000000', '--mode', 'prod'],
      /'prod' is invalid/,
    ],
    [['keys', 'create-api', '--scope', 'events:read'], /required option '--app <appId>' not specified/],
    [
      ['keys', 'create-api', '--app', '00000000-0000-4000-8000-000000000000', '--scope', 'events:write'],
      /'events:write' is invalid. Allowed values are events:read, rollups:read/,
    ],
    [
      [
        'keys',
        'create-api',
        '--app',
        '00000000-0000-4000-8000-000000000000',
        '--scope',
        'events:read',
        '--expires-in-days',
        '0',
      ],
      /--expires-in-days <n>' argument '0' is invalid. Expected a whole number from 1 to 3650/,
    ],
    [['keys', 'revoke'], /missing required argument 'keyId'/],
    [['keys', 'revoke', 'a', 'b'], /too many arguments for 'revoke'/],
    [['keys', 'rotate', 'not-a-uuid'], /value 'not-a-uuid' is invalid for argument 'keyId'. Expected a UUID/],
    [['keys', 'rotate', '00000000-0000-4000-8000-000000000000', '--grace-days', '366'], /from 0 to 365/],
    [['keys', 'rotate', '00000000-0000-4000-8000-000000000000', '--grace-days', '-1'], /--grace-days/],
    [['rollups', 'compute', '--from', '2026-02-30'], /Expected a real date, YYYY-MM-DD/],
    [
      ['rollups', 'compute', '--from', '2026-03-02', '--to', '2026-03-01'],
      /--from \(2026-03-02\) must not be after/,
    ],
    [['completion', 'fish'], /value 'fish' is invalid for argument 'shell'. Allowed choices are bash, zsh/],
  ])('%j is a usage error: one line on stderr, exit 2, before any database work', async (argv, pattern) => {
    // No configuration is given: reaching the database would fail with exit 1 instead.
    expectUsageLine(await cli(...argv), pattern);
  });
});

describe('shell completion', () => {
  it('bash: a script that completes commands, options and values', async () => {
    const run = await cli('completion', 'bash');
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(run.stdout).toContain('complete -F _tally_complete tally');
    const complete = async (...words: string[]) => {
      const script = `${run.stdout}
COMP_WORDS=(tally ${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length}; _tally_complete
printf '%s\\n' "\${COMPREPLY[@]}"`;
      const { stdout } = await exec('bash', ['-c', script]);
      return stdout.trim().split('\n').sort();
    };
    expect(await complete('')).toEqual(
      [
        '--help',
        'apps',
        'audit',
        'backup',
        'completion',
        'export',
        'help',
        'keys',
        'migrate',
        'plans',
        'quarantine',
        'restore',
        'rollups',
        'seed',
        'status',
        'suppressions',
        'users',
      ].sort(),
    );
    expect(await complete('keys', 'r')).toEqual(['revoke', 'rotate']);
    expect(await complete('keys', 'rotate', '--g')).toEqual(['--grace-days']);
    expect(await complete('keys', 'create-api', '--scope', '')).toEqual([...KNOWN_SCOPES].sort());
    expect(await complete('keys', 'create-ingest', '--mode', '')).toEqual(['live', 'test']);
    expect(await complete('completion', '')).toEqual(['--help', '--json', 'bash', 'zsh']);
  });

  it('zsh: a compdef script that names every command and option', async () => {
    const run = await cli('completion', 'zsh');
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(run.stdout.startsWith('#compdef tally\n')).toBe(true);
    expect(run.stdout).toContain('compdef _tally tally');
    for (const word of [
      'create-ingest',
      'create-api',
      'rotate',
      'revoke',
      "'--grace-days:",
      "'events\\:read'",
    ]) {
      expect(run.stdout).toContain(word);
    }
  });
});

describe('the tally bin', () => {
  it('is an executable node script', () => {
    expect(readFileSync(BIN, 'utf8').startsWith('#!/usr/bin/env node\n')).toBe(true);
    expect(statSync(BIN).mode & 0o111).toBe(0o111);
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
    expect(pkg.bin).toEqual({ tally: 'dist/src/cli/main.js' });
  });

  it("runs as node_modules/.bin/tally (the README's form), through npx and through npm run -s cli", async () => {
    const linked = path.join(ROOT, 'node_modules/.bin/tally');
    const script = await exec(linked, ['keys', 'create-ingest', '--help'], { cwd: ROOT });
    expect(script.stdout).toBe((await cli('keys', 'create-ingest', '--help')).stdout);
    // The link starts the CLI itself: no npm in between, so its exit code is the CLI's own.
    const usage = await exec(linked, ['keys', 'create'], { cwd: ROOT }).catch((err: { code: number }) => err);
    expect(usage).toMatchObject({ code: 2 });
    const npx = await exec('npx', ['--no-install', 'tally', '--help'], { cwd: ROOT });
    expect(npx.stdout).toContain('Usage: tally <command> [options]');
    const direct = await exec(BIN, ['keys', 'rotate', '--help'], { cwd: ROOT });
    expect(direct.stdout).toContain('Usage: tally keys rotate');
    const npmRun = await exec('npm', ['run', '-s', 'cli', '--', 'help', 'apps', 'list'], { cwd: ROOT });
    expect(npmRun.stdout).toBe((await cli('help', 'apps', 'list')).stdout);
  });

  it('loads neither TypeORM nor Nest for help; a database command builds a Nest context', async () => {
    // Which packages a command line loads; measured in a child so that the counts are its own.
    const loaded = async (...argv: string[]) => {
      const script = `const { runCli } = require(${JSON.stringify(BIN)});
runCli(${JSON.stringify(argv)}, { stdout() {}, stderr() {} }).then((code) => {
  const files = Object.keys(require.cache);
  const has = (p) => files.some((f) => f.includes('/node_modules/' + p));
  console.log(JSON.stringify({ code, typeorm: has('typeorm/'), nestCore: has('@nestjs/core/'), nestCommon: has('@nestjs/common/index.js') }));
});`;
      const { stdout } = await exec(process.execPath, ['-e', script], {
        cwd: ROOT,
        env: { ...process.env, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' },
      });
      return JSON.parse(stdout);
    };
    expect(await loaded('keys', 'rotate', '--help')).toEqual({
      code: 0,
      typeorm: false,
      nestCore: false,
      nestCommon: false,
    });
    // Port 1 refuses the connection: the command fails with exit 1 after loading its code, the
    // service's modules in a Nest application context.
    expect(await loaded('apps', 'list', '--json')).toEqual({
      code: 1,
      typeorm: true,
      nestCore: true,
      nestCommon: true,
    });
  });
});
