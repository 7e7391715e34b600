// Runs that measure one thing alone (--cli, --erasure) record it as a section of latest.json and
// keep the rest of the file.
import fs from 'node:fs';
import path from 'node:path';

/** Writes `value` as the `name` section of bench/results/latest.json, keeping the other sections. */
export function recordSection(root, name, value) {
  const file = path.join(root, 'bench', 'results', 'latest.json');
  let results = { schema: 1 };
  try {
    results = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    /* no full run recorded yet */
  }
  results[name] = value;
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(results, null, 2) + '\n');
}
