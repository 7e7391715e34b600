import { loadConfig } from '@app/config/config';
import { runCli } from '@app/cli/main';
import { testEnv } from './test-app';

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  /** The parsed document of a `--json` run that printed one (exit 0, or 4 for `plans check`). */
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** Runs the admin CLI in this process against the test database. */
export async function runTestCli(...argv: string[]): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(
    argv,
    { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) },
    loadConfig(testEnv()),
  );
  const json: unknown = argv.includes('--json') && stdout.trim() !== '' ? JSON.parse(stdout) : undefined;
  return { code, stdout, stderr, json };
}

/**
 * What a failed command printed on stdout: nothing, or, with --json, exactly the one failure
 * document `{ "error": { "code", "message" } }`.
 */
export function expectFailureStdout(run: CliRun, code?: string): void {
  if (run.json === undefined) {
    expect(run.stdout).toBe('');
    return;
  }
  expect(run.json).toEqual({ error: { code: code ?? expect.any(String), message: expect.any(String) } });
}
