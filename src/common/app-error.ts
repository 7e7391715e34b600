/**
 * Every stable, machine-readable error code the API can answer with. Clients switch on these,
 * so a code is never renamed once released.
 */
export type ErrorCode =
  // 400
  | 'invalid_json'
  | 'invalid_body'
  | 'invalid_query'
  | 'invalid_cursor'
  | 'unsupported_encoding'
  | 'invalid_header'
  // 401 / 403
  | 'invalid_key'
  | 'wrong_key_type'
  | 'insufficient_scope'
  | 'app_forbidden'
  // 404 / 405
  | 'not_found'
  // 413 / 415
  | 'payload_too_large'
  | 'unsupported_media_type'
  // 429
  | 'rate_limited'
  | 'too_many_auth_failures'
  // 5xx
  | 'service_unavailable'
  | 'internal_error';

export const ERROR_TITLES: Record<ErrorCode, string> = {
  invalid_json: 'Body is not valid JSON',
  invalid_body: 'Invalid request body',
  invalid_query: 'Invalid query parameters',
  invalid_cursor: 'Invalid cursor',
  unsupported_encoding: 'Unsupported content encoding',
  invalid_header: 'Invalid request header',
  invalid_key: 'Invalid or missing key',
  wrong_key_type: 'Wrong kind of key',
  insufficient_scope: 'Key lacks the required scope',
  app_forbidden: 'Key has no access to this app',
  not_found: 'Not found',
  payload_too_large: 'Batch too large',
  unsupported_media_type: 'Unsupported media type',
  rate_limited: 'Rate limit exceeded',
  too_many_auth_failures: 'Too many failed authentications',
  service_unavailable: 'Service temporarily unavailable',
  internal_error: 'Internal server error',
};

export interface FieldError {
  field: string;
  code: string;
  message: string;
}

export interface AppErrorOptions {
  /** Extra members of the problem document, e.g. `limitEvents` on a 413. */
  extra?: Record<string, unknown>;
  /** Field-level details for validation failures. */
  errors?: FieldError[];
  /** Response headers, e.g. `Retry-After` or `WWW-Authenticate`. */
  headers?: Record<string, string>;
}

/** A domain error. Services throw these; one exception filter turns them into problem+json. */
export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    readonly detail: string,
    readonly options: AppErrorOptions = {},
  ) {
    super(detail);
    this.name = 'AppError';
  }
}
