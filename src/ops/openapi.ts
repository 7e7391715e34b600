import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import type { OpenAPIObject } from '@nestjs/swagger';
import { ERROR_TITLES } from '@app/common/app-error';
import { PROBLEM_CONTENT_TYPE } from '@app/common/problem.filter';
import {
  API_KEY_SCHEME,
  API_TAGS,
  INGEST_KEY_SCHEME,
  PROBLEM_SCHEMA_REF,
  SEGMENT_KEY_SCHEME,
} from '@app/common/openapi';

export const OPENAPI_JSON_PATH = '/openapi.json';
export const DOCS_PATH = '/docs';

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
    .addTag(API_TAGS.privacy, 'Erasure of users’ data (API key with `privacy:write`).')
    .addTag(API_TAGS.plans, 'Tracking plans, their dry run, and the quarantine (API key with `plans:*`).')
    .addTag(API_TAGS.key, 'What the presented API key grants (any API key).')
    .addTag(API_TAGS.operations, 'Health, readiness and metrics. No key needed; no tenant data.')
    .addBearerAuth(
      {
        type: 'http',
        scheme: 'bearer',
        description: 'An app ingest key, `tly_live_<secret>` or `tly_test_<secret>`.',
      },
      INGEST_KEY_SCHEME,
    )
    .addBasicAuth(
      {
        type: 'http',
        scheme: 'basic',
        description: 'The ingest key as the user name, with an empty password (Segment’s write key).',
      },
      SEGMENT_KEY_SCHEME,
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
