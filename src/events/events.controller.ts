import { Controller, Get, Query, Res } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { API_TAGS, ApiProblemResponse, RATE_LIMIT_HEADERS } from '@app/common/openapi';
import type { Response } from 'express';
import { setNextPageHeaders } from '@app/common/reads/next-page';
import { ReadEndpoint } from '@app/auth/read-endpoint.decorator';
import { EventRecordDto } from '@app/common/reads/event-record.dto';
import { EventsService } from './events.service';
import { ListEventsQueryDto } from './list-events-query.dto';
import { QueryValidationPipe } from '@app/common/query-validation.pipe';

@ApiTags(API_TAGS.events)
@Controller('api/v1/events')
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
  @ReadEndpoint('events:read')
  async list(
    @Query(QueryValidationPipe) query: ListEventsQueryDto,
    @Res({ passthrough: true }) res: Response,
  ): Promise<EventRecordDto[]> {
    const page = await this.events.list(query);
    setNextPageHeaders(res, '/api/v1/events', query, page.nextCursor);
    return page.events;
  }
}
