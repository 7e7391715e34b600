import { Controller, Get, Query, Res } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { API_TAGS, ApiProblemResponse, RATE_LIMIT_HEADERS } from '@app/common/openapi';
import { ReadEndpoint } from '@app/auth/read-endpoint.decorator';
import { QueryValidationPipe } from '@app/common/query-validation.pipe';
import { setNextPageHeaders } from '@app/common/reads/next-page';
import { writeJsonArray } from '@app/common/reads/json-array-writer';
import { ListRollupsQueryDto } from './list-rollups-query.dto';
import { RollupRecordDto } from './rollup-record.dto';
import { RollupsService } from './rollups.service';

@ApiTags(API_TAGS.rollups)
@Controller('api/v1/rollups')
export class RollupsController {
  constructor(private readonly rollups: RollupsService) {}

  @Get()
  @ApiOperation({
    summary: 'List daily rollups',
    description:
      'Needs an API key with the scope `rollups:read` and access to `appId`. At most ROLLUPS_MAX_ROWS ' +
      '(default 5,000) rows per answer: `Link` and `X-Next-Cursor` name the next page.',
  })
  @ApiOkResponse({
    type: RollupRecordDto,
    isArray: true,
    description:
      'Daily rollups: date ascending, the app-wide total row first, then eventName. `Link` and ' +
      '`X-Next-Cursor` name the next page.',
    headers: RATE_LIMIT_HEADERS,
  })
  @ApiProblemResponse(
    400,
    'Invalid query parameters (`invalid_query`, with `errors`) or a tampered `cursor` (`invalid_cursor`).',
  )
  @ReadEndpoint('rollups:read')
  async list(@Query(QueryValidationPipe) query: ListRollupsQueryDto, @Res() res: Response): Promise<void> {
    const page = await this.rollups.list(query);
    setNextPageHeaders(res, '/api/v1/rollups', query, page.nextCursor);
    await writeJsonArray(res, page.rollups);
  }
}
