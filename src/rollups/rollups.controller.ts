import { Controller, Get, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { API_TAGS, ApiProblemResponse, RATE_LIMIT_HEADERS } from '@app/common/openapi';
import { ReadEndpoint } from '@app/auth/read-endpoint.decorator';
import { QueryValidationPipe } from '@app/common/query-validation.pipe';
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
    description: 'Needs an API key with the scope `rollups:read` and access to `appId`.',
  })
  @ApiOkResponse({
    type: RollupRecordDto,
    isArray: true,
    description: 'Daily rollups: date ascending, the app-wide total row first, then eventName.',
    headers: RATE_LIMIT_HEADERS,
  })
  @ApiProblemResponse(400, 'Invalid query parameters (`invalid_query`, with `errors`).')
  @ReadEndpoint('rollups:read')
  list(@Query(QueryValidationPipe) query: ListRollupsQueryDto): Promise<RollupRecordDto[]> {
    return this.rollups.list(query);
  }
}
