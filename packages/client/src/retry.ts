// Pure retry rules: which answers are retried, how long to wait, and when to give up.

export interface RetryPolicy {
  /** Requests that may carry one event, the first included. */
  maxAttempts: number;
  /** Time after the first attempt of a batch beyond which no retry starts. */
  maxRetryElapsedMs: number;
  /** First backoff step (full jitter, doubled per retry). */
  backoffBaseMs: number;
  /** Largest backoff step. */
  backoffMaxMs: number;
}

export interface FailedAttempt {
  /** HTTP status of the answer; 0 when none came. */
  status: number;
  /** The answer's `Retry-After` in ms, or null. */
  retryAfterMs: number | null;
  /** Retries made so far for this batch (0 after the first attempt). */
  retry: number;
  /** The most requests any event of the batch has been in. */
  attempts: number;
  /** Time since the batch's first attempt. */
  elapsedMs: number;
}

export type RetryDecision =
  /** Not retryable: the server's answer is final. */
  | { kind: 'fail' }
  /** Out of attempts or of time. */
  | { kind: 'give-up' }
  /**
   * Try again after `delayMs`. `pause` is set when the server named the delay (Retry-After on a
   * 429 or 503): that is its word for the whole key, so every request waits it out.
   */
  | { kind: 'retry'; delayMs: number; pause: boolean };

/** Answers worth another attempt: no answer at all, 408, 429 and 5xx except 501 and 505. */
export function isRetryable(status: number): boolean {
  return (
    status === 0 || status === 408 || status === 429 || (status >= 500 && status !== 501 && status !== 505)
  );
}

/** Exponential backoff with full jitter: `random` in [0, 1) times min(max, base · 2^retry). */
export function backoffDelay(retry: number, policy: RetryPolicy, random: number): number {
  const cap = Math.min(policy.backoffMaxMs, policy.backoffBaseMs * 2 ** Math.min(retry, 30));
  return Math.floor(random * cap);
}

/** What to do after a failed attempt. `random` in [0, 1) draws the jitter. */
export function decideRetry(failed: FailedAttempt, policy: RetryPolicy, random: number): RetryDecision {
  if (!isRetryable(failed.status)) return { kind: 'fail' };
  const named = (failed.status === 429 || failed.status === 503) && failed.retryAfterMs !== null;
  const delayMs = named ? failed.retryAfterMs! : backoffDelay(failed.retry, policy, random);
  if (failed.attempts >= policy.maxAttempts || failed.elapsedMs + delayMs > policy.maxRetryElapsedMs) {
    return { kind: 'give-up' };
  }
  return { kind: 'retry', delayMs, pause: named };
}
