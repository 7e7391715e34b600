import { applyDecorators } from '@nestjs/common';
import { ApiResponse } from '@nestjs/swagger';
import { PROBLEM_CONTENT_TYPE } from './problem.filter';

/** Names of the two bearer schemes, for `@ApiBearerAuth(INGEST_KEY_SCHEME)` on controllers. */
export const INGEST_KEY_SCHEME = 'ingestKey';
export const API_KEY_SCHEME = 'apiKey';
/** HTTP Basic with the ingest key as user name, as Segment's SDKs send their write key. */
export const SEGMENT_KEY_SCHEME = 'segmentWriteKey';

export const PROBLEM_SCHEMA_REF = '#/components/schemas/Problem';

/** Tags, in the order the reference shows them. */
export const API_TAGS = {
  ingest: 'ingest',
  events: 'events',
  rollups: 'rollups',
  key: 'key',
  privacy: 'privacy',
  plans: 'plans',
  operations: 'operations',
} as const;

const HEADER_DOCS: Record<string, { description: string; schema: { type: 'string' | 'integer' } }> = {
  'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer' } },
  'WWW-Authenticate': {
    description: 'RFC 6750 challenge, e.g. `Bearer realm="tally", error="invalid_token"`.',
    schema: { type: 'string' },
  },
  'RateLimit-Limit': { description: 'Requests allowed per window.', schema: { type: 'integer' } },
  'RateLimit-Remaining': { description: 'Requests left in this window.', schema: { type: 'integer' } },
  'RateLimit-Reset': { description: 'Seconds until the window resets.', schema: { type: 'integer' } },
};

/** The `RateLimit-*` headers of a successful API response, for `@ApiOkResponse({ headers })`. */
export const RATE_LIMIT_HEADERS = {
  'RateLimit-Limit': HEADER_DOCS['RateLimit-Limit'],
  'RateLimit-Remaining': HEADER_DOCS['RateLimit-Remaining'],
  'RateLimit-Reset': HEADER_DOCS['RateLimit-Reset'],
};

/**
 * Documents an error response as problem+json. Endpoint owners use it beside their own
 * `@Api*` decorators: `@ApiProblemResponse(401, 'Missing or invalid key.', ['WWW-Authenticate'])`.
 */
export function ApiProblemResponse(
  status: number,
  description: string,
  headers: (keyof typeof HEADER_DOCS)[] = [],
): MethodDecorator & ClassDecorator {
  return applyDecorators(
    ApiResponse({
      status,
      description,
      headers: headers.length ? Object.fromEntries(headers.map((h) => [h, HEADER_DOCS[h]])) : undefined,
      content: { [PROBLEM_CONTENT_TYPE]: { schema: { $ref: PROBLEM_SCHEMA_REF } } },
    }),
  );
}

/**
 * The errors every read endpoint shares, for the scope it needs; `unavailable` replaces the
 * description of its 503 where the endpoint has other reasons for it than the read's own.
 */
export function ApiReadErrors(scope: string, unavailable?: string): MethodDecorator & ClassDecorator {
  return applyDecorators(
    ApiProblemResponse(
      401,
      'Missing or invalid API key (`invalid_key`), or an ingest key (`wrong_key_type`).',
      ['WWW-Authenticate'],
    ),
    ApiProblemResponse(
      403,
      `The key lacks \`${scope}\` (\`insufficient_scope\`) or has no access to \`appId\` (\`app_forbidden\`).`,
      ['WWW-Authenticate'],
    ),
    ApiProblemResponse(
      429,
      'Read rate of the key exceeded, or READ_MAX_CONCURRENT_PER_KEY reads of the key already running, or ' +
        'its read time per second spent (`rate_limited`), or too many invalid keys (`too_many_auth_failures`).',
      ['Retry-After'],
    ),
    ApiProblemResponse(
      503,
      unavailable ??
        'The database is unavailable (`service_unavailable`), or the query ran past READ_STATEMENT_TIMEOUT_MS ' +
          'and was cancelled (`query_timeout`): narrow `from`/`to` or the filters. Retry after Retry-After.',
      ['Retry-After'],
    ),
  );
}
