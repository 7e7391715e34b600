import { Controller, Get, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { API_TAGS, ApiProblemResponse, RATE_LIMIT_HEADERS } from '@app/common/openapi';
import { ReadEndpoint } from '@app/auth/read-endpoint.decorator';
import { QueryValidationPipe } from '@app/common/query-validation.pipe';
import { ActiveUsersQueryDto, BreakdownQueryDto } from './insights-query.dto';
import { ActiveUsersRowDto, BreakdownRowDto } from './insights-record.dto';
import { InsightsService } from './insights.service';

@ApiTags(API_TAGS.rollups)
@Controller('api/v1')
export class InsightsController {
  constructor(private readonly insights: InsightsService) {}

  @Get('active-users')
  @ApiOperation({
    summary: 'Count distinct active users over any range',
    description:
      'Needs an API key with the scope `rollups:read` and access to `appId`. Exact distinct users per ' +
      "bucket (day, ISO week, month or the whole range) of the app's local days, empty buckets included; " +
      'with `window`, rolling counts. Fresh as the rollups are.',
  })
  @ApiOkResponse({ type: ActiveUsersRowDto, isArray: true, headers: RATE_LIMIT_HEADERS })
  @ApiProblemResponse(400, 'Invalid query parameters (`invalid_query`, with `errors`).')
  @ReadEndpoint('rollups:read')
  activeUsers(@Query(QueryValidationPipe) query: ActiveUsersQueryDto): Promise<ActiveUsersRowDto[]> {
    return this.insights.activeUsers(query);
  }

  @Get('breakdown')
  @ApiOperation({
    summary: 'Break events, users and sessions down by a dimension',
    description:
      'Needs an API key with the scope `rollups:read` and access to `appId`. The values with the most events ' +
      '(top `limit`, per day with interval=day), the row of events without the field (value null), and one ' +
      '`other` row for the rest; exact counts.',
  })
  @ApiOkResponse({ type: BreakdownRowDto, isArray: true, headers: RATE_LIMIT_HEADERS })
  @ApiProblemResponse(
    400,
    'Invalid query parameters (`invalid_query`, with `errors`), or `by` names no dimension of the app ' +
      '(`unknown_dimension`).',
  )
  @ReadEndpoint('rollups:read')
  breakdown(@Query(QueryValidationPipe) query: BreakdownQueryDto): Promise<BreakdownRowDto[]> {
    return this.insights.breakdown(query);
  }
}
