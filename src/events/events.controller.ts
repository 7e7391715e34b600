import { Controller, Get, Query, Res, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { SkipThrottle } from '@nestjs/throttler';
import type { Response } from 'express';
import { ApiKeyGuard } from '@app/auth/api-key.guard';
import { RequireScope, ScopeGuard } from '@app/auth/scope.guard';
import { KeyThrottlerGuard } from '@app/common/rate-limit/key-throttler.guard';
import { EventRecordDto } from './event-record.dto';
import { EventsService } from './events.service';
import { ListEventsQueryDto } from './list-events-query.dto';
import { QueryValidationPipe } from './query-validation.pipe';

@ApiTags('events')
@ApiBearerAuth()
@Controller('api/v1/events')
@UseGuards(ApiKeyGuard, KeyThrottlerGuard, ScopeGuard)
@SkipThrottle({ ingest: true })
@RequireScope('events:read')
export class EventsController {
  constructor(private readonly events: EventsService) {}

  @Get()
  @ApiOkResponse({ type: EventRecordDto, isArray: true })
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
