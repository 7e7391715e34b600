import { Controller, Get, HttpCode, Post, Query, Req, Res } from '@nestjs/common';
import { ApiBody, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { setNextPageHeaders } from '@app/common/reads/next-page';
import { requestKey } from '@app/auth/authenticated-request';
import { ReadEndpoint } from '@app/auth/read-endpoint.decorator';
import { AppError } from '@app/common/app-error';
import { API_TAGS, ApiProblemResponse, RATE_LIMIT_HEADERS } from '@app/common/openapi';
import { normaliseAppId } from '@app/common/ids';
import { DEFAULT_LIMIT } from '@app/common/reads/page-params';
import { QueryValidationPipe } from '@app/common/query-validation.pipe';
import { AppQueryDto } from './app-query.dto';
import { ListQuarantineQueryDto, QuarantineRecord, ReplayResultDto, VIOLATION_CODES } from './quarantine.dto';
import { QuarantineService } from './quarantine.service';
import type { QuarantineFilters } from './quarantine.types';
import { hasControlCharacter, NO_CONTROL_CHARACTERS_PATTERN } from '@app/common/control-characters';
import { IngestBodyReader } from '@app/ingest/ingest-body.reader';
import { PlanEndpoint } from './plan-endpoint.decorator';
import { QuarantineReplayService, ReplayResult } from './quarantine-replay.service';

function invalidBody(field: string, message: string): AppError {
  return new AppError('invalid_body', `${field}: ${message}`, {
    errors: [{ field, code: 'invalid_value', message }],
  });
}

/** The replay body's filters: `eventName` and `code`, both optional. */
export function replayFilters(value: unknown): QuarantineFilters {
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalidBody('body', 'The body must be a JSON object.');
  }
  const body = value as Record<string, unknown>;
  const filters: QuarantineFilters = {};
  for (const [name, v] of Object.entries(body)) {
    if (name === 'eventName') {
      if (typeof v !== 'string' || v.length === 0 || v.length > 200 || hasControlCharacter(v)) {
        throw invalidBody(
          'eventName',
          'eventName must be a string of 1 to 200 characters, without control characters.',
        );
      }
      filters.eventName = v;
    } else if (name === 'code') {
      if (!VIOLATION_CODES.includes(v as never)) {
        throw invalidBody('code', `code must be one of ${VIOLATION_CODES.join(', ')}.`);
      }
      filters.code = v as QuarantineFilters['code'];
    } else {
      throw invalidBody(name, `Unknown field ${name}.`);
    }
  }
  return filters;
}

/** The quarantine: events a plan rejected under `enforce`, and their replay. */
@ApiTags(API_TAGS.plans)
@Controller('api/v1/quarantine')
export class QuarantineController {
  constructor(
    private readonly quarantine: QuarantineService,
    private readonly replayer: QuarantineReplayService,
    private readonly reader: IngestBodyReader,
  ) {}

  @Get()
  @ApiOperation({
    summary: 'List quarantined events',
    description: 'Needs the scope `events:read`. Newest first, paged like GET /api/v1/events.',
  })
  @ApiOkResponse({
    type: QuarantineRecord,
    isArray: true,
    description:
      'Quarantined events with their `code` and `violations`. `Link` and `X-Next-Cursor` name the next page.',
    headers: RATE_LIMIT_HEADERS,
  })
  @ApiProblemResponse(
    400,
    'Invalid query parameters (`invalid_query`) or a tampered `cursor` (`invalid_cursor`).',
  )
  @ReadEndpoint('events:read')
  async list(
    @Query(QueryValidationPipe) query: ListQuarantineQueryDto,
    @Res({ passthrough: true }) res: Response,
  ): Promise<QuarantineRecord[]> {
    const filters = { eventName: query.eventName, code: query.code };
    const page = await this.quarantine.list(
      normaliseAppId(query.appId),
      filters,
      query.cursor,
      query.limit ?? DEFAULT_LIMIT,
    );
    setNextPageHeaders(res, '/api/v1/quarantine', query, page.nextCursor);
    return page.events;
  }

  @Post('replay')
  @HttpCode(200)
  @ApiOperation({
    summary: 'Replay quarantined events against the current plan',
    description:
      'Needs the scope `plans:write`. Events that now pass are stored exactly once (the dedup window ' +
      'applies) and leave the quarantine, one transaction per chunk. Safe to run twice or concurrently.',
  })
  @ApiBody({
    description: 'Which quarantined events to check again; `{}` for all.',
    schema: {
      type: 'object',
      additionalProperties: false,
      properties: {
        eventName: { type: 'string', minLength: 1, maxLength: 200, pattern: NO_CONTROL_CHARACTERS_PATTERN },
        code: { type: 'string', enum: VIOLATION_CODES },
      },
    },
  })
  @ApiOkResponse({ type: ReplayResultDto, headers: RATE_LIMIT_HEADERS })
  @ApiProblemResponse(400, 'Invalid query (`invalid_query`), JSON (`invalid_json`) or body (`invalid_body`).')
  @ApiProblemResponse(415, 'A body that is not application/json.')
  @PlanEndpoint('plans:write')
  async replay(@Query(QueryValidationPipe) query: AppQueryDto, @Req() req: Request): Promise<ReplayResult> {
    const bodyless =
      req.headers['content-length'] === '0' ||
      (!req.headers['content-length'] && !req.headers['transfer-encoding']);
    const value = bodyless ? undefined : (await this.reader.read(req, requestKey(req).id)).value;
    const actor = { type: 'api_key' as const, keyId: requestKey(req).id };
    return this.replayer.replay(normaliseAppId(query.appId), replayFilters(value), actor);
  }
}
