import { execFileSync } from 'node:child_process';

/**
 * The size limits of eslint.config.mjs, checked through ESLint itself: physical lines count
 * (comments and blank lines included), at most 80 per function and 300 per class.
 */
const comments = (n: number) => Array.from({ length: n }, (_, i) => `  // line ${i}`).join('\n');
const CASES = [
  {
    name: 'an 81-line function',
    code: `export function f(): void {\n${comments(79)}\n}\n`,
    filePath: 'src/ingest/x.ts',
  },
  {
    name: 'an 80-line function',
    code: `export function f(): void {\n${comments(78)}\n}\n`,
    filePath: 'src/ingest/x.ts',
  },
  { name: 'a 301-line class', code: `export class C {\n${comments(299)}\n}\n`, filePath: 'src/ingest/x.ts' },
  { name: 'a 300-line class', code: `export class C {\n${comments(298)}\n}\n`, filePath: 'src/ingest/x.ts' },
  {
    name: 'a 301-line class in the client',
    code: `export class C {\n${comments(299)}\n}\n`,
    filePath: 'packages/client/src/x.ts',
  },
];

const LINT_SCRIPT = `
  import { ESLint } from 'eslint';
  const cases = JSON.parse(process.argv[1]);
  const eslint = new ESLint();
  const out = [];
  for (const c of cases) {
    const [result] = await eslint.lintText(c.code, { filePath: c.filePath });
    out.push(result.messages.map((m) => m.ruleId));
  }
  process.stdout.write(JSON.stringify(out));
`;

describe('size limits (lint)', () => {
  it('counts physical lines: at most 80 per function and 300 per class', () => {
    const stdout = execFileSync(
      process.execPath,
      ['--input-type=module', '-e', LINT_SCRIPT, JSON.stringify(CASES)],
      { encoding: 'utf8' },
    );
    const rules = JSON.parse(stdout) as string[][];
    expect(Object.fromEntries(CASES.map((c, i) => [c.name, rules[i]]))).toEqual({
      'an 81-line function': ['max-lines-per-function'],
      'an 80-line function': [],
      'a 301-line class': ['local/max-class-lines'],
      'a 300-line class': [],
      'a 301-line class in the client': ['local/max-class-lines'],
    });
  });
});
