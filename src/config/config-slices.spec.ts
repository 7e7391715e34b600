import * as path from 'node:path';
import { readdirSync, readFileSync } from 'node:fs';

const SRC = path.resolve(__dirname, '..');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sources(full);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts') ? [full] : [];
  });
}

describe('configuration slices', () => {
  const injecting = sources(SRC).filter(
    (file) => !file.startsWith(__dirname) && readFileSync(file, 'utf8').includes('APP_CONFIG'),
  );

  it('finds the classes and factories that are given the configuration', () => {
    expect(injecting.length).toBeGreaterThan(15);
  });

  it('types each injection as the ConfigSlice it reads, never the whole AppConfig', () => {
    const whole = injecting.filter((file) => /\bAppConfig\b/.test(readFileSync(file, 'utf8')));
    expect(whole.map((file) => path.relative(SRC, file))).toEqual([]);
  });
});
