import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/**
 * docs/architecture.md stays true: its module table names each folder of src/ exactly once, and
 * the folders are the ones whose imports `npm run lint` checks (eslint.config.mjs).
 */
const ROOT = path.resolve(__dirname, '..');

function tableModules(): string[] {
  const doc = fs.readFileSync(path.join(ROOT, 'docs', 'architecture.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Modules'), doc.indexOf('### Allowed imports'));
  return [...section.matchAll(/^\| `([a-z-]+)` \|/gm)].map((m) => m[1]);
}

function lintFolders(): { folders: string[]; allowed: string[] } {
  const script = `import('./eslint.config.mjs').then((m) => process.stdout.write(JSON.stringify({
    folders: m.SRC_FOLDERS, allowed: Object.keys(m.ALLOWED_IMPORTS) })))`;
  return JSON.parse(execFileSync(process.execPath, ['-e', script], { cwd: ROOT, encoding: 'utf8' })) as {
    folders: string[];
    allowed: string[];
  };
}

describe('docs/architecture.md', () => {
  it('lists each module of src/ once, as the lint map does', () => {
    const folders = fs
      .readdirSync(path.join(ROOT, 'src'), { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name)
      .sort();
    const rows = tableModules();
    const repeated = rows.filter((name, i) => rows.indexOf(name) !== i);
    expect(repeated).toEqual([]);
    expect([...rows].sort()).toEqual(folders);
    const lint = lintFolders();
    expect([...lint.folders].sort()).toEqual(folders);
    expect([...lint.allowed].sort()).toEqual(folders);
  });

  it('gives one account of the allowed imports', () => {
    const doc = fs.readFileSync(path.join(ROOT, 'docs', 'architecture.md'), 'utf8');
    const section = doc.slice(
      doc.indexOf('### Allowed imports'),
      doc.indexOf('```mermaid', doc.indexOf('### Allowed imports')),
    );
    expect(section.match(/Feature modules stand side by side/g)).toHaveLength(1);
  });
});
