import { applyDecorators, UseGuards, UseInterceptors } from '@nestjs/common';
import { ApiBearerAuth } from '@nestjs/swagger';
import { SkipThrottle } from '@nestjs/throttler';
import { API_KEY_SCHEME, ApiReadErrors } from '@app/common/openapi';
import { ReadTimeoutInterceptor } from '@app/common/read-timeout.interceptor';
import { ApiKeyGuard } from './api-key.guard';
import { KeyThrottlerGuard } from './key-throttler.guard';
import type { Scope } from './key.entity';
import { RequireScope, ScopeGuard } from './scope.guard';
import { ReadConcurrencyInterceptor } from './read-concurrency.interceptor';

/**
 * A read endpoint of the REST API: an API key (401), the key's read rate (429), then `scope` and
 * access to `appId` (403), with those errors in the OpenAPI document. The guards run in that order;
 * then the key's read cost bound (concurrent reads and read time, 429) and the statement timeout
 * (503 `query_timeout`) wrap the handler.
 */
export function ReadEndpoint(scope: Scope | readonly Scope[]): MethodDecorator {
  return applyDecorators(
    ApiBearerAuth(API_KEY_SCHEME),
    UseGuards(ApiKeyGuard, KeyThrottlerGuard, ScopeGuard),
    UseInterceptors(ReadConcurrencyInterceptor, ReadTimeoutInterceptor),
    SkipThrottle({ ingest: true }),
    RequireScope(scope),
    ApiReadErrors(typeof scope === 'string' ? scope : scope.join('` or `')),
  );
}
