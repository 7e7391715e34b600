import { Controller, Get, Headers, HttpCode, Post, Put, Query, Req, Res } from '@nestjs/common';
import {
  ApiBody,
  ApiExtraModels,
  getSchemaPath,
  ApiHeader,
  ApiOkResponse,
  ApiOperation,
  ApiTags,
} from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { requestKey } from '@app/auth/authenticated-request';
import { ReadEndpoint } from '@app/auth/read-endpoint.decorator';
import { API_TAGS, ApiProblemResponse, RATE_LIMIT_HEADERS } from '@app/common/openapi';
import { normaliseAppId } from '@app/common/ids';
import { QueryValidationPipe } from '@app/common/query-validation.pipe';
import { AppQueryDto } from './app-query.dto';
import { EventDefinitionDto, PlanBodyDto, PlanDto } from './plan.dto';
import type { PlanVersion } from './plan.types';
import { parseIfMatch, PlansService } from './plans.service';
import { EventQualityDto, PlanQualityQueryDto } from './quality.dto';
import { EventQuality, QualityService } from './quality.service';
import { invalidQuery } from '@app/common/query-validation.pipe';
import { DAY_MS, utcDateString } from '@app/common/time';
import { DEFAULT_LIMIT } from '@app/common/reads/page-params';
import { setNextPageHeaders } from '@app/common/reads/next-page';
import { IngestBodyReader } from '@app/ingest/ingest-body.reader';
import { IngestResultDto } from '@app/ingest/ingest-result.dto';
import { IngestCheckService } from '@app/ingest/ingest-check.service';
import type { IngestResult } from '@app/ingest/ingest.types';
import { PlanEndpoint } from './plan-endpoint.decorator';

function toDto(v: PlanVersion): PlanDto {
  return { appId: v.appId, version: v.version, ...v.plan, createdAt: v.createdAt };
}

/** The tracking plan of an app: read, replace, and the dry run that shares ingest's path. */
@ApiTags(API_TAGS.plans)
@ApiExtraModels(EventDefinitionDto, PlanBodyDto)
@Controller('api/v1/plan')
export class PlanController {
  constructor(
    private readonly plans: PlansService,
    private readonly reader: IngestBodyReader,
    private readonly ingest: IngestCheckService,
    private readonly quality: QualityService,
  ) {}

  @Get()
  @ApiOperation({ summary: "Read the app's tracking plan", description: 'Needs the scope `plans:read`.' })
  @ApiOkResponse({
    type: PlanDto,
    description: 'The current plan; version 0 and mode `off` when the app has none. `ETag` is `"<version>"`.',
    headers: {
      ...RATE_LIMIT_HEADERS,
      ETag: { schema: { type: 'string' }, description: 'The version, quoted.' },
    },
  })
  @ApiProblemResponse(400, 'Invalid query parameters (`invalid_query`, with `errors`).')
  @ReadEndpoint('plans:read')
  async get(@Query(QueryValidationPipe) query: AppQueryDto, @Res({ passthrough: true }) res: Response) {
    const plan = await this.plans.get(normaliseAppId(query.appId));
    res.setHeader('ETag', `"${plan.version}"`);
    return toDto(plan);
  }

  @Get('quality')
  @ApiOperation({
    summary: 'Data quality under the tracking plan',
    description:
      'Needs the scope `plans:read`. Per event name over the UTC days `fromDate`–`toDate` (default: the ' +
      'last 7 days, at most 366): the events the plan accepted, flagged and rejected, and the rules ' +
      'broken most often. Counted while a plan in mode flag or enforce applies.',
  })
  @ApiOkResponse({
    type: EventQualityDto,
    isArray: true,
    description:
      'Most rejected and flagged first, then by event name; at most `limit` names. `Link` and ' +
      '`X-Next-Cursor` name the next page.',
    headers: RATE_LIMIT_HEADERS,
  })
  @ApiProblemResponse(
    400,
    'Invalid query parameters (`invalid_query`, with `errors`) or a tampered `cursor` (`invalid_cursor`).',
  )
  @ReadEndpoint('plans:read')
  async getQuality(
    @Query(QueryValidationPipe) query: PlanQualityQueryDto,
    @Res({ passthrough: true }) res: Response,
  ): Promise<EventQuality[]> {
    const toDate = query.toDate ?? utcDateString(Date.now());
    const fromDate = query.fromDate ?? utcDateString(Date.parse(toDate) - 6 * DAY_MS);
    const span = (Date.parse(toDate) - Date.parse(fromDate)) / DAY_MS;
    if (span < 0 || span > 365) {
      throw invalidQuery([
        {
          field: 'fromDate',
          code: 'invalid_range',
          message: 'fromDate must be on or before toDate, at most 366 days',
        },
      ]);
    }
    const page = await this.quality.summary(
      normaliseAppId(query.appId),
      fromDate,
      toDate,
      query.cursor,
      query.limit ?? DEFAULT_LIMIT,
    );
    setNextPageHeaders(res, '/api/v1/plan/quality', query, page.nextCursor);
    return page.rows;
  }

  @Put()
  @ApiOperation({
    summary: "Replace the app's tracking plan",
    description:
      'Needs the scope `plans:write`. Stores a new version when `If-Match` names the current one; every ' +
      'instance applies it within a second.',
  })
  @ApiHeader({
    name: 'If-Match',
    required: true,
    description: 'The ETag of the plan read, e.g. `"3"` (`"0"` for none).',
  })
  @ApiBody({ type: PlanBodyDto })
  @ApiOkResponse({ type: PlanDto, description: 'The stored version.', headers: RATE_LIMIT_HEADERS })
  @ApiProblemResponse(
    400,
    'Invalid query (`invalid_query`), JSON (`invalid_json`), If-Match (`invalid_header`), or plan ' +
      '(`invalid_plan`, with `problems`: every `path` and `message`); nothing stored.',
  )
  @ApiProblemResponse(412, 'If-Match names an older version (`version_conflict`, with `currentVersion`).')
  @ApiProblemResponse(428, 'If-Match is missing (`precondition_required`).')
  @PlanEndpoint('plans:write', { compiles: true })
  async put(
    @Query(QueryValidationPipe) query: AppQueryDto,
    @Headers('if-match') ifMatch: string | undefined,
    @Req() req: Request,
    @Res({ passthrough: true }) res: Response,
  ): Promise<PlanDto> {
    const appId = normaliseAppId(query.appId);
    const expected = parseIfMatch(ifMatch);
    const body = await this.reader.read(req, requestKey(req).id);
    const keyId = requestKey(req).id;
    const plan = await this.plans.put(appId, expected, body.value, { type: 'api_key', keyId });
    res.setHeader('ETag', `"${plan.version}"`);
    return toDto(plan);
  }

  @Post('check')
  @HttpCode(200)
  @ApiOperation({
    summary: 'Check events against a plan (dry run)',
    description:
      'Needs the scope `plans:read`. Answers the batch metering result that POST /api/ingest would give ' +
      'under the plan in the body, or the stored one. Nothing is stored, counted or metered.',
  })
  @ApiBody({
    schema: {
      type: 'object',
      required: ['events'],
      properties: {
        events: {
          type: 'array',
          minItems: 1,
          items: { type: 'object' },
          description: 'Events as POST /api/ingest takes them.',
        },
        sentAt: { type: 'integer', description: 'As for POST /api/ingest.' },
        plan: {
          $ref: getSchemaPath(PlanBodyDto),
          description: 'The plan to check against; the stored one when absent.',
        },
      },
    },
  })
  @ApiOkResponse({
    type: IngestResultDto,
    description: 'The result ingest would give.',
    headers: RATE_LIMIT_HEADERS,
  })
  @ApiProblemResponse(
    400,
    'Invalid query (`invalid_query`), JSON (`invalid_json`), envelope (`invalid_body`) or plan (`invalid_plan`).',
  )
  @ApiProblemResponse(413, 'More than INGEST_MAX_EVENTS events or INGEST_MAX_BYTES bytes.')
  @ApiProblemResponse(415, 'Content-Type is not application/json.')
  @PlanEndpoint('plans:read', { compiles: true })
  async check(@Query(QueryValidationPipe) query: AppQueryDto, @Req() req: Request): Promise<IngestResult> {
    const key = requestKey(req);
    const body = await this.reader.read(req, key.id);
    const value = body.value as { plan?: unknown } | null;
    const raw = typeof value === 'object' && value !== null && !Array.isArray(value) ? value.plan : undefined;
    const plan = raw === undefined ? undefined : await this.plans.compile(raw);
    return this.ingest.check(key, body, { appId: normaliseAppId(query.appId), plan });
  }
}
