import { Module } from '@nestjs/common';
import { RateLimitStoreModule } from '@app/common/rate-limit/rate-limit.module';
import { AuthCoreModule } from './auth-core.module';
import { KeyUsageFlusher } from './key-usage.flusher';
import { AuthFailureLimiter } from './auth-failure.limiter';
import { KeyAuthenticator } from './key-auth';
import { IngestKeyGuard } from './ingest-key.guard';
import { ApiKeyGuard } from './api-key.guard';
import { ScopeGuard } from './scope.guard';
import { KeyInfoController } from './key-info.controller';
import { ReadSlots } from './read-concurrency.interceptor';

@Module({
  imports: [AuthCoreModule, RateLimitStoreModule],
  controllers: [KeyInfoController],
  providers: [
    KeyUsageFlusher,
    AuthFailureLimiter,
    KeyAuthenticator,
    IngestKeyGuard,
    ApiKeyGuard,
    ScopeGuard,
    ReadSlots,
  ],
  exports: [AuthCoreModule, KeyAuthenticator, IngestKeyGuard, ApiKeyGuard, ScopeGuard, ReadSlots],
})
export class AuthModule {}
