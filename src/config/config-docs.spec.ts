import * as path from 'node:path';
import { readFileSync, writeFileSync } from 'node:fs';
import { renderEnvExample, renderOperationsDoc } from './config-docs';
import { loadConfig } from './config';
import { SETTINGS } from './settings';

// `npm run config:docs` (UPDATE_CONFIG_DOCS=1) rewrites the committed files from the table.
const UPDATE = process.env.UPDATE_CONFIG_DOCS === '1';
const ROOT = path.resolve(__dirname, '..', '..');
const ENV_EXAMPLE = path.join(ROOT, '.env.example');
const OPERATIONS = path.join(ROOT, 'docs', 'operations.md');

function matchesCommitted(file: string, generated: string): void {
  if (UPDATE) writeFileSync(file, generated);
  expect(readFileSync(file, 'utf8')).toBe(generated);
}

describe('configuration docs', () => {
  it('.env.example is the one generated from the settings table (npm run config:docs)', () => {
    matchesCommitted(ENV_EXAMPLE, renderEnvExample());
  });

  it("docs/operations.md's configuration tables are the ones generated from the settings table", () => {
    matchesCommitted(OPERATIONS, renderOperationsDoc(readFileSync(OPERATIONS, 'utf8')));
  });

  it('lists every variable once, and the values .env.example sets are the defaults', () => {
    const example = renderEnvExample();
    const names = Object.values(SETTINGS).map((s) => s.env);
    expect(new Set(names).size).toBe(names.length);
    for (const name of names) expect(example).toMatch(new RegExp(`^#?${name}=`, 'm'));
    const env = Object.fromEntries(
      [...example.matchAll(/^([A-Z_]+)=(.*)$/gm)].map(([, name, value]) => [name, value] as const),
    );
    expect(Object.keys(env).length).toBeGreaterThan(40);
    expect(loadConfig(env)).toEqual(loadConfig({}));
  });

  it('gives each docs table its rows and nothing else between the markers', () => {
    const doc = renderOperationsDoc(readFileSync(OPERATIONS, 'utf8'));
    for (const { env } of Object.values(SETTINGS)) {
      expect(doc.match(new RegExp(`^\\| \`${env}\` `, 'gm'))).toHaveLength(1);
    }
    expect(() => renderOperationsDoc('# Operations\n')).toThrow('docs have no config table for http');
  });
});
