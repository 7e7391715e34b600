import { execFileSync } from 'node:child_process';

/**
 * The module boundaries of eslint.config.mjs, checked through ESLint itself: each case lints a
 * small in-memory file as if it stood at `filePath`, and reports the rule ids it broke.
 */
const CASES = [
  { name: 'rollups imports events', filePath: 'src/rollups/x.ts', from: '@app/events/events.service' },
  { name: 'events imports ingest', filePath: 'src/events/x.ts', from: '@app/ingest/ingest.limits' },
  { name: 'common imports auth', filePath: 'src/common/x.ts', from: '@app/auth/authenticated-request' },
  { name: 'database imports auth', filePath: 'src/database/x.ts', from: '@app/auth/app.entity' },
  { name: 'ingest imports ops', filePath: 'src/ingest/x.ts', from: '@app/ops/drain-state' },
  { name: 'a relative import across folders', filePath: 'src/rollups/x.ts', from: '../events/cursor' },
  { name: 'rollups imports common', filePath: 'src/rollups/x.ts', from: '@app/common/reads/query-params' },
  { name: 'events imports auth', filePath: 'src/events/x.ts', from: '@app/auth/scope.guard' },
  { name: 'storage imports database', filePath: 'src/storage/x.ts', from: '@app/database/database.module' },
];

const LINT_SCRIPT = `
  import { ESLint } from 'eslint';
  const cases = JSON.parse(process.argv[1]);
  const eslint = new ESLint();
  const out = [];
  for (const c of cases) {
    const code = "import { x } from '" + c.from + "';\\nexport const y = x;\\n";
    const [result] = await eslint.lintText(code, { filePath: c.filePath });
    out.push(result.messages.map((m) => m.ruleId));
  }
  process.stdout.write(JSON.stringify(out));
`;

describe('module boundaries (lint)', () => {
  let rules: string[][];

  beforeAll(() => {
    const stdout = execFileSync(
      process.execPath,
      ['--input-type=module', '-e', LINT_SCRIPT, JSON.stringify(CASES)],
      { encoding: 'utf8' },
    );
    rules = JSON.parse(stdout) as string[][];
  });

  it.each(CASES.slice(0, 6).map((c, i) => [c.name, i] as const))('fails lint when %s', (_name, i) => {
    expect(rules[i]).toEqual(['no-restricted-imports']);
  });

  it.each(CASES.slice(6).map((c, i) => [c.name, i + 6] as const))('passes lint when %s', (_name, i) => {
    expect(rules[i]).toEqual([]);
  });
});
