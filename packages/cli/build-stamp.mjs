// The build's freshness stamp. `--write` records a finished build (the last step of `npm run build`);
// `--check` exits 0 when the stamp is newer than every input of the build, so that `npm start`
// after `npm ci` (whose `prepare` step built) or after an unchanged checkout does not build again.
import { readdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const STAMP = path.join(ROOT, 'dist', '.build-stamp');
// What `npm run build` reads: the service, migrations, the dashboard, the client, and their configs.
const INPUTS = [
  'src',
  'migrations',
  'web',
  'packages/client/src',
  'packages/client/package.json',
  'packages/client/tsconfig.build.json',
  'packages/client/tsconfig.cjs.json',
  'package.json',
  'package-lock.json',
  'tsconfig.json',
  'tsconfig.build.json',
  'nest-cli.json',
];

/** Newest modification time under `file`, in ms (0 when it does not exist). */
function newest(file) {
  let stat;
  try {
    stat = statSync(file);
  } catch {
    return 0;
  }
  if (!stat.isDirectory()) return stat.mtimeMs;
  let max = stat.mtimeMs;
  for (const entry of readdirSync(file)) max = Math.max(max, newest(path.join(file, entry)));
  return max;
}

const mode = process.argv[2];
if (mode === '--write') {
  writeFileSync(STAMP, `${new Date().toISOString()}\n`);
} else if (mode === '--check') {
  const built = newest(STAMP);
  const changed = Math.max(...INPUTS.map((f) => newest(path.join(ROOT, f))));
  if (built === 0 || changed >= built) process.exit(1);
  process.stdout.write('tally: the build is up to date (dist/.build-stamp); not building again\n');
} else {
  process.stderr.write('usage: node packages/cli/build-stamp.mjs --write | --check\n');
  process.exit(2);
}
