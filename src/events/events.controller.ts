import { Controller, Get, Query, Res, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { API_KEY_SCHEME, API_TAGS, ApiProblemResponse, RATE_LIMIT_HEADERS } from '@app/ops/openapi';
import { SkipThrottle } from '@nestjs/throttler';
import type { Response } from 'express';
import { ApiKeyGuard } from '@app/auth/api-key.guard';
import { RequireScope, ScopeGuard } from '@app/auth/scope.guard';
import { KeyThrottlerGuard } from '@app/common/rate-limit/key-throttler.guard';
import { EventRecordDto } from './event-record.dto';
import { EventsService } from './events.service';
import { ListEventsQueryDto } from './list-events-query.dto';
import { QueryValidationPipe } from './query-validation.pipe';

@ApiTags(API_TAGS.events)
@ApiBearerAuth(API_KEY_SCHEME)
@Controller('api/v1/events')
@UseGuards(ApiKeyGuard, KeyThrottlerGuard, ScopeGuard)
@SkipThrottle({ ingest: true })
@RequireScope('events:read')
export class EventsController {
  constructor(private readonly events: EventsService) {}

  @Get()
  @ApiOperation({
    summary: 'List recent events',
    description: 'Needs an API key with the scope `events:read` and access to `appId`.',
  })
  @ApiOkResponse({
    type: EventRecordDto,
    isArray: true,
    description: 'Recent events, newest first. `Link` and `X-Next-Cursor` name the next page.',
    headers: RATE_LIMIT_HEADERS,
  })
  @ApiProblemResponse(
    400,
    'Invalid query parameters (`invalid_query`, with `errors`) or a tampered `cursor` (`invalid_cursor`).',
  )
  @ApiProblemResponse(
    401,
    'Missing or invalid API key (`invalid_key`), or an ingest key (`wrong_key_type`).',
    ['WWW-Authenticate'],
  )
  @ApiProblemResponse(
    403,
    'The key lacks `events:read` (`insufficient_scope`) or has no access to `appId` (`app_forbidden`).',
    ['WWW-Authenticate'],
  )
  @ApiProblemResponse(429, 'Read rate of the key exceeded (`rate_limited`), or too many 401s.', [
    'Retry-After',
  ])
  @ApiProblemResponse(503, 'The database is unavailable. Retry after Retry-After.', ['Retry-After'])
  async list(
    @Query(QueryValidationPipe) query: ListEventsQueryDto,
    @Res({ passthrough: true }) res: Response,
  ): Promise<EventRecordDto[]> {
    const page = await this.events.list(query);
    if (page.nextCursor) {
      const next = new URLSearchParams();
      for (const [name, value] of Object.entries(query)) {
        if (name !== 'cursor' && value !== undefined) next.set(name, String(value));
      }
      next.set('cursor', page.nextCursor);
      res.setHeader('Link', `</api/v1/events?${next.toString()}>; rel="next"`);
      res.setHeader('X-Next-Cursor', page.nextCursor);
    }
    return page.events;
  }
}
