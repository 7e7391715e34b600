import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';

const exec = promisify(execFile);
const MAIN = path.resolve(__dirname, '../dist/src/main.js');
const CLI = path.resolve(__dirname, '../dist/src/cli/main.js');

describe('configuration is validated at start', () => {
  it.each([
    ['the server', MAIN, []],
    ['the CLI', CLI, ['apps', 'list']],
  ])('%s exits non-zero and names a bad variable', async (_name, bin, args) => {
    const env = { ...process.env, PORT: 'abc', DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' };
    await expect(exec(process.execPath, [bin, ...args], { env, timeout: 20_000 })).rejects.toMatchObject({
      code: 1,
      stdout: '',
      stderr: expect.stringContaining('PORT must be an integer, got "abc"'),
    });
  });

  it('the CLI with --json says so in its one JSON document too', async () => {
    const env = { ...process.env, PORT: 'abc', DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' };
    const failed = await exec(process.execPath, [CLI, 'apps', 'list', '--json'], {
      env,
      timeout: 20_000,
    }).catch((err: { code: number; stdout: string }) => err);
    expect(failed).toMatchObject({ code: 1 });
    expect(JSON.parse((failed as { stdout: string }).stdout)).toEqual({
      error: { code: 'config', message: expect.stringContaining('PORT must be an integer, got "abc"') },
    });
  });
});
