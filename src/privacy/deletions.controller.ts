import { Controller, Get, HttpCode, Param, Post, Query, Req, Res } from '@nestjs/common';
import {
  ApiBody,
  ApiConsumes,
  ApiExtraModels,
  ApiOkResponse,
  ApiOperation,
  ApiResponse,
  ApiTags,
  getSchemaPath,
} from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { API_TAGS, ApiProblemResponse, RATE_LIMIT_HEADERS } from '@app/common/openapi';
import { QueryValidationPipe } from '@app/common/query-validation.pipe';
import { DEFAULT_LIMIT } from '@app/common/reads/page-params';
import { setNextPageHeaders } from '@app/common/reads/next-page';
import { parseInstant } from '@app/common/reads/time-params';
import { ReadEndpoint } from '@app/auth/read-endpoint.decorator';
import { requestKey } from '@app/auth/authenticated-request';
import { appForbidden } from '@app/auth/auth-errors';
import { CreateDeletionDto, DeletionRecordDto, ListDeletionsQueryDto } from './deletion.dto';
import { parseDeletionRequest } from './deletion-request';
import { DeletionsService, DeletionView } from './deletions.service';
import { readJsonBody, type JsonBodyLimits } from '@app/common/http/json-body';
import { AppError } from '@app/common/app-error';

const SCOPE = 'privacy:write';

/** 1,000 ids of up to 200 characters, escaped, with room to spare. */
const DELETION_BODY: JsonBodyLimits = {
  maxBytes: 1_500_000,
  tooLarge: (_bytes, detail) =>
    new AppError('payload_too_large', detail, { headers: { Connection: 'close' } }),
};
@ApiTags(API_TAGS.privacy)
@Controller('api/v1/deletions')
export class DeletionsController {
  constructor(private readonly deletions: DeletionsService) {}

  @Post()
  @HttpCode(202)
  @ApiOperation({
    summary: 'Erase users of an app',
    description:
      'Needs an API key with the scope `privacy:write` and access to `appId`. Deletes the users’ events ' +
      'and recomputes the rollups of the days they touched; with `suppress` (default), their new events ' +
      'are refused (`user_suppressed`) on every instance within a second.',
  })
  @ApiConsumes('application/json')
  @ApiExtraModels(CreateDeletionDto)
  @ApiBody({
    // anonymousUserIds, userIds (account ids of the SDK formats), or both.
    schema: {
      allOf: [{ $ref: getSchemaPath(CreateDeletionDto) }],
      anyOf: [{ required: ['anonymousUserIds'] }, { required: ['userIds'] }],
    },
  })
  @ApiResponse({
    status: 202,
    type: DeletionRecordDto,
    description: 'The deletion, accepted; `Location` names it.',
    headers: {
      Location: { description: 'The deletion: `/api/v1/deletions/{id}`.', schema: { type: 'string' } },
      ...RATE_LIMIT_HEADERS,
    },
  })
  @ApiProblemResponse(
    400,
    'Invalid JSON (`invalid_json`) or body (`invalid_body`, with `errors`): 1 to 1,000 ids of 1 to 200 characters.',
  )
  @ApiProblemResponse(413, 'The body is over 1.5 MB (`payload_too_large`).')
  @ApiProblemResponse(415, 'Content-Type is not application/json (`unsupported_media_type`).')
  @ReadEndpoint(SCOPE)
  async create(@Req() req: Request, @Res({ passthrough: true }) res: Response): Promise<DeletionView> {
    const key = requestKey(req);
    const body = parseDeletionRequest((await readJsonBody(req, DELETION_BODY)).value);
    if (!key.appIds.includes(body.appId)) throw appForbidden(SCOPE);
    const deletion = await this.deletions.request(body, { type: 'api_key', keyId: key.id });
    res.setHeader('Location', `/api/v1/deletions/${deletion.id}`);
    return deletion;
  }

  @Get()
  @ApiOperation({
    summary: 'List the deletions of an app',
    description:
      'Needs an API key with the scope `privacy:write` or `events:export` and access to `appId`. Newest ' +
      'first, at most `limit` (default 100); `Link` and `X-Next-Cursor` name the next page. A done ' +
      'deletion lists its users’ `userKeys`, the `userKey` of their exported records: a warehouse that ' +
      'keeps exports deletes those users too, with `since` to read only the deletions done since its last sync.',
  })
  @ApiOkResponse({ type: DeletionRecordDto, isArray: true, headers: RATE_LIMIT_HEADERS })
  @ApiProblemResponse(
    400,
    'Invalid query parameters (`invalid_query`, with `errors`) or a tampered `cursor` (`invalid_cursor`).',
  )
  @ReadEndpoint([SCOPE, 'events:export'])
  async list(
    @Query(QueryValidationPipe) query: ListDeletionsQueryDto,
    @Res({ passthrough: true }) res: Response,
  ): Promise<DeletionView[]> {
    const since = query.since === undefined ? null : parseInstant(query.since);
    const page = await this.deletions.list(query.appId, query.cursor, query.limit ?? DEFAULT_LIMIT, since);
    setNextPageHeaders(res, '/api/v1/deletions', query, page.nextCursor);
    return page.deletions;
  }

  @Get(':id')
  @ApiOperation({
    summary: 'Get a deletion',
    description: 'Needs an API key with the scope `privacy:write` and access to the deletion’s app.',
  })
  @ApiOkResponse({ type: DeletionRecordDto, headers: RATE_LIMIT_HEADERS })
  @ApiProblemResponse(404, 'No deletion with this id among the key’s apps (`not_found`).')
  @ReadEndpoint(SCOPE)
  get(@Req() req: Request, @Param('id') id: string): Promise<DeletionView> {
    return this.deletions.get(id, requestKey(req).appIds);
  }
}
