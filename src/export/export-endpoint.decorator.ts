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
 * scope and app 403), and the statement timeout (503 `query_timeout`) for its first chunk. The
 * per-key read-time budget is not ReadEndpoint's interceptor, which charges a request's whole
 * duration when it ends: an export is admitted and charged chunk by chunk by the controller
 * (./export-budget.ts), for the server's time only, not the client's.
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
