import { applyDecorators, UseGuards, UseInterceptors } from '@nestjs/common';
import { ApiBearerAuth } from '@nestjs/swagger';
import { SkipThrottle } from '@nestjs/throttler';
import { API_KEY_SCHEME, ApiReadErrors } from '@app/common/openapi';
import { ApiKeyGuard } from '@app/auth/api-key.guard';
import { KeyThrottlerGuard } from '@app/auth/key-throttler.guard';
import type { Scope } from '@app/auth/key.entity';
import { RequireScope, ScopeGuard } from '@app/auth/scope.guard';
import { COMPILE_DEADLINES } from './plan-worker';
import { ReadConcurrencyInterceptor } from '@app/auth/read-concurrency.interceptor';

/** The 503 of an endpoint that compiles the plan it is sent. */
const COMPILE_UNAVAILABLE =
  `The database is unavailable, or the machine was too busy to compile the plan within ` +
  `${COMPILE_DEADLINES.request.wallMs / 1000} s while the compile had CPU time left (\`service_unavailable\`); ` +
  'nothing was stored. Retry after Retry-After.';

/**
 * A plan or quarantine endpoint that takes a body: an API key (401), the key's read rate (429),
 * then `scope` and access to `appId` (403). Its time counts toward the key's read budget, as a
 * read's does (READ_MAX_CONCURRENT_PER_KEY, READ_TIME_MS_PER_SECOND; 429): a plan's compile or a
 * replay can take seconds, and a key that sends them back to back must wait its turn like one
 * that reads. Unlike a read, it is not bound by the read statement timeout: a replay runs in
 * several transactions of its own. `compiles`: it compiles the plan it is sent, which a busy
 * machine can make it give up (503).
 */
export function PlanEndpoint(scope: Scope, options: { compiles?: boolean } = {}): MethodDecorator {
  return applyDecorators(
    ApiBearerAuth(API_KEY_SCHEME),
    UseGuards(ApiKeyGuard, KeyThrottlerGuard, ScopeGuard),
    UseInterceptors(ReadConcurrencyInterceptor),
    SkipThrottle({ ingest: true }),
    RequireScope(scope),
    ApiReadErrors(scope, options.compiles ? COMPILE_UNAVAILABLE : undefined),
  );
}
