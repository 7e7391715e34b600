/** A field-level problem of a 400 answer (`invalid_body`, `invalid_query`). */
export interface TallyFieldError {
  field: string;
  code: string;
  message: string;
}

export interface TallyErrorInit {
  status: number;
  code: string;
  detail: string;
  requestId?: string | null;
  retryAfterMs?: number | null;
  errors?: TallyFieldError[];
  body?: Record<string, unknown> | null;
  cause?: unknown;
}

/**
 * Every failure the client reports. `status` is the HTTP status, or 0 when no answer came
 * (codes `network_error`, `timeout`) or the client refused on its own (codes below).
 *
 * Client-side codes: `network_error`, `timeout`, `event_too_large`, `retries_exhausted`,
 * `queue_full`, `client_closed`, `shutdown_timeout`, `invalid_response`.
 */
export class TallyError extends Error {
  readonly status: number;
  readonly code: string;
  readonly detail: string;
  readonly requestId: string | null;
  /** From `Retry-After` (seconds or an HTTP date), in milliseconds; null when absent. */
  readonly retryAfterMs: number | null;
  readonly errors: TallyFieldError[];
  /** The whole problem+json body, e.g. `limitEvents` and `limitBytes` of a 413. */
  readonly body: Record<string, unknown> | null;

  constructor(init: TallyErrorInit) {
    super(`${init.code}: ${init.detail}`, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'TallyError';
    this.status = init.status;
    this.code = init.code;
    this.detail = init.detail;
    this.requestId = init.requestId ?? null;
    this.retryAfterMs = init.retryAfterMs ?? null;
    this.errors = init.errors ?? [];
    this.body = init.body ?? null;
  }

  /** Reads an error response (problem+json or anything else) into a TallyError. */
  static async fromResponse(res: Response, now: number = Date.now()): Promise<TallyError> {
    let body: Record<string, unknown> | null = null;
    try {
      const text = await res.text();
      const parsed: unknown = text ? JSON.parse(text) : null;
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed))
        body = parsed as Record<string, unknown>;
    } catch {
      // Not JSON: a proxy or load balancer answered.
    }
    const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
    return new TallyError({
      status: res.status,
      code: str(body?.code) ?? `http_${res.status}`,
      detail: str(body?.detail) ?? (res.statusText || `HTTP ${res.status}`),
      requestId: str(body?.requestId) ?? res.headers.get('x-request-id'),
      retryAfterMs: parseRetryAfter(res.headers.get('retry-after'), now),
      errors: Array.isArray(body?.errors) ? (body.errors as TallyFieldError[]) : [],
      body,
    });
  }
}

/** `Retry-After` as delay-seconds or an HTTP date, in ms from `now`; null when absent or unreadable. */
export function parseRetryAfter(value: string | null | undefined, now: number): number | null {
  if (value === null || value === undefined) return null;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  if (Number.isNaN(at)) return null;
  return Math.max(0, at - now);
}
