import { applyDecorators, UseGuards, UseInterceptors } from '@nestjs/common';
import { ApiBearerAuth } from '@nestjs/swagger';
import { SkipThrottle } from '@nestjs/throttler';
import { API_KEY_SCHEME, ApiReadErrors } from '@app/common/openapi';
import { ReadTimeoutInterceptor } from '@app/common/read-timeout.interceptor';
import { ApiKeyGuard } from '@app/auth/api-key.guard';
import { KeyThrottlerGuard } from '@app/auth/key-throttler.guard';
import { RequireScope, ScopeGuard } from '@app/auth/scope.guard';

/**
 * The export endpoint's guards: those of every read (API key 401, the key's request rate 429,
 * scope and app 403), and the statement timeout (503 `query_timeout`) for its first chunk. Not
 * the per-key read-time budget of ReadEndpoint: an export reads for minutes by design; one
 * export per key and EXPORT_MAX_CONCURRENT per instance bound it instead.
 */
export function ExportEndpoint(): MethodDecorator {
  return applyDecorators(
    ApiBearerAuth(API_KEY_SCHEME),
    UseGuards(ApiKeyGuard, KeyThrottlerGuard, ScopeGuard),
    UseInterceptors(ReadTimeoutInterceptor),
    SkipThrottle({ ingest: true }),
    RequireScope('events:export'),
    ApiReadErrors('events:export'),
  );
}
