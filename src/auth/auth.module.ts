import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { RateLimitStoreModule } from '@app/common/rate-limit/rate-limit.module';
import { AppEntity } from './app.entity';
import { KeyEntity } from './key.entity';
import { AppRepository } from './app.repository';
import { KeyRepository } from './key.repository';
import { AppsService } from './apps.service';
import { KeysService } from './keys.service';
import { KeyVerifier } from './key-verifier';
import { KeyUsageFlusher } from './key-usage.flusher';
import { AuthFailureLimiter } from './auth-failure.limiter';
import { KeyAuthenticator } from './key-auth';
import { IngestKeyGuard } from './ingest-key.guard';
import { ApiKeyGuard } from './api-key.guard';
import { ScopeGuard } from './scope.guard';
import { KeyInfoController } from './key-info.controller';
import { ReadSlots } from './read-concurrency.interceptor';

@Module({
  imports: [TypeOrmModule.forFeature([AppEntity, KeyEntity]), RateLimitStoreModule],
  controllers: [KeyInfoController],
  providers: [
    AppRepository,
    KeyRepository,
    AppsService,
    KeysService,
    KeyVerifier,
    KeyUsageFlusher,
    AuthFailureLimiter,
    KeyAuthenticator,
    IngestKeyGuard,
    ApiKeyGuard,
    ScopeGuard,
    ReadSlots,
  ],
  exports: [
    AppsService,
    KeysService,
    KeyVerifier,
    KeyAuthenticator,
    IngestKeyGuard,
    ApiKeyGuard,
    ScopeGuard,
    ReadSlots,
  ],
})
export class AuthModule {}
