import { Controller, Get, UseGuards } from '@nestjs/common';
import { SkipThrottle } from '@nestjs/throttler';
import { ApiKeyGuard } from '@app/auth/api-key.guard';
import { RequireScope, ScopeGuard } from '@app/auth/scope.guard';
import { KeyThrottlerGuard } from '@app/common/rate-limit/key-throttler.guard';

@Controller('api/v1/events')
@UseGuards(ApiKeyGuard, KeyThrottlerGuard, ScopeGuard)
@SkipThrottle({ ingest: true })
@RequireScope('events:read')
export class EventsController {
  @Get()
  list() {
    return [];
  }
}
