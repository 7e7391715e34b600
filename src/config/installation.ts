import * as path from 'node:path';
import { existsSync, readFileSync } from 'node:fs';

/**
 * The folder of the Tally installation this code belongs to: the nearest folder above this file
 * whose package.json names the `tally` package. The embedded database lives there by default, so
 * the service and the CLI find it whatever the current directory.
 */
export function installationRoot(from = __dirname): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const manifest = path.join(dir, 'package.json');
    if (existsSync(manifest)) {
      try {
        if ((JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'tally') return dir;
      } catch {
        // Not a package of ours: look further up.
      }
    }
    if (path.dirname(dir) === dir) return process.cwd();
  }
}
