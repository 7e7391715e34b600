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
  | 'malformed_request'
  | 'invalid_plan'
  | 'unknown_dimension'
  // 401 / 403
  | 'invalid_key'
  | 'wrong_key_type'
  | 'insufficient_scope'
  | 'app_forbidden'
  // 404 / 405 / 408 / 409
  | 'not_found'
  | 'body_timeout'
  | 'request_timeout'
  | 'conflict'
  // 417 / 431
  | 'expectation_failed'
  | 'headers_too_large'
  // 412 / 428
  | 'version_conflict'
  | 'precondition_required'
  // 413 / 415
  | 'payload_too_large'
  | 'unsupported_media_type'
  // 429
  | 'rate_limited'
  | 'too_many_auth_failures'
  // 5xx
  | 'service_unavailable'
  | 'query_timeout'
  | 'internal_error';

export const ERROR_TITLES: Record<ErrorCode, string> = {
  invalid_json: 'Body is not valid JSON',
  invalid_body: 'Invalid request body',
  invalid_query: 'Invalid query parameters',
  invalid_cursor: 'Invalid cursor',
  unsupported_encoding: 'Unsupported content encoding',
  invalid_header: 'Invalid request header',
  malformed_request: 'Malformed HTTP request',
  invalid_plan: 'Invalid tracking plan',
  unknown_dimension: 'Unknown breakdown dimension',
  invalid_key: 'Invalid or missing key',
  wrong_key_type: 'Wrong kind of key',
  insufficient_scope: 'Key lacks the required scope',
  app_forbidden: 'Key has no access to this app',
  not_found: 'Not found',
  body_timeout: 'Request body too slow',
  request_timeout: 'Request too slow',
  conflict: 'Conflicts with the current state',
  expectation_failed: 'Expectation not supported',
  headers_too_large: 'Request headers too large',
  version_conflict: 'The resource has changed since that version',
  precondition_required: 'If-Match is required',
  payload_too_large: 'Batch too large',
  unsupported_media_type: 'Unsupported media type',
  rate_limited: 'Rate limit exceeded',
  too_many_auth_failures: 'Too many failed authentications',
  service_unavailable: 'Service temporarily unavailable',
  query_timeout: 'Query took too long',
  internal_error: 'Internal server error',
};

/** The HTTP status each code answers with: a code fixes its status, so callers name the code only. */
export const ERROR_STATUS: Record<ErrorCode, number> = {
  invalid_json: 400,
  invalid_body: 400,
  invalid_query: 400,
  invalid_cursor: 400,
  invalid_header: 400,
  malformed_request: 400,
  invalid_plan: 400,
  unknown_dimension: 400,
  unsupported_encoding: 415,
  invalid_key: 401,
  wrong_key_type: 401,
  insufficient_scope: 403,
  app_forbidden: 403,
  not_found: 404,
  body_timeout: 408,
  request_timeout: 408,
  conflict: 409,
  expectation_failed: 417,
  headers_too_large: 431,
  version_conflict: 412,
  precondition_required: 428,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  too_many_auth_failures: 429,
  service_unavailable: 503,
  query_timeout: 503,
  internal_error: 500,
};

/** The field-level `code` of an entry of a problem's `errors`, stable like the error codes. */
export type FieldErrorCode =
  | 'required'
  | 'missing_field'
  | 'invalid_type'
  | 'invalid_format'
  | 'invalid_value'
  | 'invalid_timestamp'
  | 'invalid_date'
  | 'invalid_range'
  | 'not_an_integer'
  | 'out_of_range'
  | 'too_long'
  | 'span_too_long'
  | 'conflict'
  | 'repeated'
  | 'unknown_parameter'
  | 'unknown_dimension';

export interface FieldError {
  field: string;
  code: FieldErrorCode;
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

/**
 * A domain error. Services throw these; one exception filter turns them into problem+json.
 * The HTTP status follows from the code (ERROR_STATUS).
 */
export class AppError extends Error {
  readonly status: number;

  constructor(
    readonly code: ErrorCode,
    readonly detail: string,
    readonly options: AppErrorOptions = {},
  ) {
    super(detail);
    this.name = 'AppError';
    this.status = ERROR_STATUS[code];
  }
}
