import { applyDecorators } from '@nestjs/common';
import type { INestApplication } from '@nestjs/common';
import { ApiResponse, DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import type { OpenAPIObject } from '@nestjs/swagger';
import { ERROR_TITLES } from '@app/common/app-error';
import { PROBLEM_CONTENT_TYPE } from '@app/common/problem.filter';

/** Names of the two bearer schemes, for `@ApiBearerAuth(INGEST_KEY_SCHEME)` on controllers. */
export const INGEST_KEY_SCHEME = 'ingestKey';
export const API_KEY_SCHEME = 'apiKey';

export const OPENAPI_JSON_PATH = '/openapi.json';
export const DOCS_PATH = '/docs';

export const PROBLEM_SCHEMA_REF = '#/components/schemas/Problem';

/** Tags, in the order the reference shows them. */
export const API_TAGS = {
  ingest: 'ingest',
  events: 'events',
  rollups: 'rollups',
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

/** The errors every read endpoint shares, for the scope it needs. */
export function ApiReadErrors(scope: string): MethodDecorator & ClassDecorator {
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
      'Read rate of the key exceeded, or READ_MAX_CONCURRENT_PER_KEY reads of the key already running ' +
        '(`rate_limited`), or too many invalid keys (`too_many_auth_failures`).',
      ['Retry-After'],
    ),
    ApiProblemResponse(
      503,
      'The database is unavailable (`service_unavailable`), or the query ran past READ_STATEMENT_TIMEOUT_MS ' +
        'and was cancelled (`query_timeout`): narrow `from`/`to` or the filters. Retry after Retry-After.',
      ['Retry-After'],
    ),
  );
}

/** The RFC 9457 body of every error response, with Tally's `code` and `requestId`. */
function problemSchemas(): NonNullable<NonNullable<OpenAPIObject['components']>['schemas']> {
  return {
    FieldError: {
      type: 'object',
      required: ['field', 'code', 'message'],
      properties: {
        field: { type: 'string', description: 'Path of the offending field, e.g. `events` or `limit`.' },
        code: { type: 'string', description: 'Machine-readable reason, e.g. `invalid_type`.' },
        message: { type: 'string' },
      },
    },
    Problem: {
      type: 'object',
      description:
        'RFC 9457 problem details, sent as `application/problem+json` with every error. ' +
        'Clients switch on `code`, which never changes once released. Some errors add members, ' +
        'e.g. `limitEvents` and `limitBytes` on a 413.',
      required: ['type', 'title', 'status', 'detail', 'code', 'requestId'],
      properties: {
        type: { type: 'string', examples: ['urn:tally:problem:invalid_key'] },
        title: { type: 'string' },
        status: { type: 'integer', minimum: 400, maximum: 599 },
        detail: { type: 'string' },
        code: { type: 'string', enum: Object.keys(ERROR_TITLES) },
        requestId: { type: 'string', description: 'Also sent as the `X-Request-Id` header.' },
        errors: { type: 'array', items: { $ref: '#/components/schemas/FieldError' } },
      },
      additionalProperties: true,
    },
  };
}

/** The OpenAPI 3.1 description of the whole service, generated from the controllers' decorators. */
export function buildOpenApiDocument(app: INestApplication): OpenAPIObject {
  const config = new DocumentBuilder()
    .setOpenAPIVersion('3.1.0')
    .setTitle('Tally')
    .setDescription(
      'Analytics event ingest and read API. Apps send batches of events with an ingest key; ' +
        'server-side callers read recent events and daily rollups with a scoped API key. ' +
        'Every error is `application/problem+json`.',
    )
    .setVersion('1.0.0')
    .addServer('{baseUrl}', 'Your Tally deployment', {
      baseUrl: { default: 'http://localhost:3000', description: 'Scheme, host and port of the service.' },
    })
    .addTag(API_TAGS.ingest, 'Batch ingestion of analytics events (ingest key).')
    .addTag(API_TAGS.events, 'Recent events of an app (API key with `events:read`).')
    .addTag(API_TAGS.rollups, 'Daily rollups of an app (API key with `rollups:read`).')
    .addTag(API_TAGS.operations, 'Health, readiness and metrics. No key needed; no tenant data.')
    .addBearerAuth(
      {
        type: 'http',
        scheme: 'bearer',
        description: 'An app ingest key, `tly_live_<secret>` or `tly_test_<secret>`.',
      },
      INGEST_KEY_SCHEME,
    )
    .addBearerAuth(
      {
        type: 'http',
        scheme: 'bearer',
        description: 'A scoped REST API key, `tly_api_<secret>`, with `events:read` and/or `rollups:read`.',
      },
      API_KEY_SCHEME,
    )
    .addGlobalResponse({
      status: 500,
      description: 'A bug. The body carries a `requestId` to quote when reporting it.',
      content: { [PROBLEM_CONTENT_TYPE]: { schema: { $ref: PROBLEM_SCHEMA_REF } } },
    })
    .build();
  const document = SwaggerModule.createDocument(app, config);
  document.components = {
    ...document.components,
    schemas: { ...problemSchemas(), ...document.components?.schemas },
  };
  return document;
}

/** Serves the document at `/openapi.json` and an interactive reference at `/docs`. */
export function setupOpenApi(app: INestApplication): void {
  SwaggerModule.setup(DOCS_PATH, app, () => buildOpenApiDocument(app), {
    jsonDocumentUrl: OPENAPI_JSON_PATH,
    raw: ['json'],
    customSiteTitle: 'Tally API reference',
    // No call to the public validator service: the reference works offline and leaks nothing.
    swaggerOptions: { validatorUrl: null },
  });
}
