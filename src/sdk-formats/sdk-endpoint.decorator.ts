import { applyDecorators, HttpCode, UseGuards, type Type } from '@nestjs/common';
import { ApiBody, ApiConsumes, ApiOkResponse } from '@nestjs/swagger';
import { SkipThrottle } from '@nestjs/throttler';
import { KeyThrottlerGuard } from '@app/auth/key-throttler.guard';
import { ApiProblemResponse, RATE_LIMIT_HEADERS } from '@app/common/openapi';

/** What every SDK-format ingest endpoint answers and wears, after its own key guard. */
export function SdkIngestEndpoint(guard: Type, result: Type, body: string) {
  return applyDecorators(
    UseGuards(guard, KeyThrottlerGuard),
    SkipThrottle({ read: true }),
    HttpCode(200),
    ApiConsumes('application/json', 'text/plain'),
    ApiBody({ description: body, schema: { type: 'object', additionalProperties: true } }),
    ApiOkResponse({
      type: result,
      description:
        'The batch metering result of POST /api/ingest, sent after the commit, per message of the SDK batch. ' +
        'Rejected messages are also kept in the quarantine with their code.',
      headers: RATE_LIMIT_HEADERS,
    }),
    ApiProblemResponse(
      400,
      'Invalid JSON, or no message in the body (`invalid_json`, `invalid_body`); nothing stored.',
    ),
    ApiProblemResponse(
      401,
      'Missing or invalid ingest key (`invalid_key`), or an API key (`wrong_key_type`).',
      ['WWW-Authenticate'],
    ),
    ApiProblemResponse(408, 'The body arrived too slowly (`body_timeout`); nothing stored.'),
    ApiProblemResponse(
      413,
      'More than INGEST_MAX_EVENTS messages or INGEST_MAX_BYTES decoded bytes; nothing stored (`limitEvents`, `limitBytes`).',
    ),
    ApiProblemResponse(
      415,
      'Content-Type is not application/json or text/plain, or an unknown Content-Encoding.',
    ),
    ApiProblemResponse(429, 'A rate, CPU or in-flight limit of the key; nothing stored.', ['Retry-After']),
    ApiProblemResponse(503, 'The database is unavailable; nothing stored. Retry after Retry-After.', [
      'Retry-After',
    ]),
  );
}
