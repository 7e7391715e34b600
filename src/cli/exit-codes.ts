import { AppError, ErrorCode } from '@app/common/app-error';
import { ConfigError } from '@app/config/config';

/**
 * The admin CLI's exit codes. Scripts rely on them, so they only ever gain entries. They say what
 * the person at the terminal should do next, and owe nothing to HTTP statuses.
 */
export const ExitCode = {
  /** The command did what it says. */
  Ok: 0,
  /** It could not run: the database is unreachable, an environment variable is wrong, or worse. */
  Failure: 1,
  /** The command line is wrong: no or unknown command, unknown option, missing or malformed value. */
  Usage: 2,
  /** Well-formed, but it names no app or key, or a key that can no longer be used (revoked, expired). */
  Refused: 3,
  /** A check found events that would be rejected (`tally plans check`). */
  Rejected: 4,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** A mistake in the command line found by a command itself: one line on stderr, exit code 2. */
export class UsageError extends Error {}

// What a domain error from a service means at the terminal; any other code is a failure.
const EXIT_FOR_ERROR: Partial<Record<ErrorCode, ExitCode>> = {
  invalid_body: ExitCode.Usage,
  invalid_query: ExitCode.Usage,
  not_found: ExitCode.Refused,
  conflict: ExitCode.Refused,
  // A stale --if-match: the plan moved on since it was read.
  version_conflict: ExitCode.Refused,
};

/**
 * What ended a command: its exit code, a stable `error` code for `--json` (the service's own
 * code where a service refused, else `usage`, `database_missing`, `config` or `failed`) and the
 * one line for stderr.
 */
export interface Failure {
  code: ExitCode;
  error: string;
  message: string;
}

export function describeFailure(err: unknown): Failure {
  if (err instanceof UsageError) return { code: ExitCode.Usage, error: 'usage', message: err.message };
  // By name: the database code loads only once a command needs it (see runtime.ts).
  if (err instanceof Error && err.name === 'EmbeddedClusterMissing') {
    return { code: ExitCode.Usage, error: 'database_missing', message: err.message };
  }
  if (err instanceof AppError) {
    return { code: EXIT_FOR_ERROR[err.code] ?? ExitCode.Failure, error: err.code, message: err.detail };
  }
  if (err instanceof ConfigError) return { code: ExitCode.Failure, error: 'config', message: err.message };
  const message = err instanceof Error ? err.message : String(err);
  return { code: ExitCode.Failure, error: 'failed', message: message.split('\n')[0] || 'unexpected failure' };
}

/** The one JSON document a failed command prints on stdout with --json. */
export function failureDocument(failure: Pick<Failure, 'error' | 'message'>): string {
  return JSON.stringify({ error: { code: failure.error, message: failure.message } }, null, 2) + '\n';
}
