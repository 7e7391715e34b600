import { existsSync } from 'node:fs';
import path from 'node:path';

/**
 * The built script of a worker thread: `name` beside the calling module's built file (`dir`,
 * its `__dirname`), or, when the tests run the TypeScript sources, the same file under dist/.
 */
export function builtWorkerFile(dir: string, name: string): string {
  const beside = path.join(dir, name);
  if (existsSync(beside)) return beside;
  let root = dir;
  while (!existsSync(path.join(root, 'package.json')) && path.dirname(root) !== root)
    root = path.dirname(root);
  return path.join(root, 'dist', path.relative(root, dir), name);
}
