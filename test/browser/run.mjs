// Runs the dashboard's browser tests when a Chromium is installed. `npm test` calls it without
// TALLY_BROWSER_REQUIRED and only reports a missing browser; `npm run test:browser` sets it and fails.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';

const CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];
const required = process.env.TALLY_BROWSER_REQUIRED === '1';
const browser = [process.env.CHROMIUM_PATH, ...CANDIDATES].find((p) => p && existsSync(p));

if (!browser) {
  const message =
    'Browser tests: no Chromium found (looked at CHROMIUM_PATH and ' +
    `${CANDIDATES.join(', ')}). Install one with: apt-get install -y chromium`;
  if (required) {
    process.stderr.write(`${message}\n`);
    process.exit(1);
  }
  process.stdout.write(`\n*** SKIPPED: ${message} ***\n\n`);
  process.exit(0);
}

const jest = createRequire(import.meta.url).resolve('jest/bin/jest');
const result = spawnSync(
  process.execPath,
  [
    jest,
    '--runInBand',
    '--testMatch',
    '<rootDir>/test/browser/**/*.browser-spec.ts',
    ...process.argv.slice(2),
  ],
  { stdio: 'inherit', env: { ...process.env, TALLY_CHROMIUM: browser } },
);
process.exit(result.status ?? 1);
