import { Controller, Get, Query, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { API_KEY_SCHEME, API_TAGS, ApiProblemResponse, RATE_LIMIT_HEADERS } from '@app/ops/openapi';
import { SkipThrottle } from '@nestjs/throttler';
import { ApiKeyGuard } from '@app/auth/api-key.guard';
import { RequireScope, ScopeGuard } from '@app/auth/scope.guard';
import { KeyThrottlerGuard } from '@app/common/rate-limit/key-throttler.guard';
import { QueryValidationPipe } from '@app/events/query-validation.pipe';
import { ListRollupsQueryDto } from './list-rollups-query.dto';
import { RollupRecordDto } from './rollup-record.dto';
import { RollupsService } from './rollups.service';

@ApiTags(API_TAGS.rollups)
@ApiBearerAuth(API_KEY_SCHEME)
@Controller('api/v1/rollups')
@UseGuards(ApiKeyGuard, KeyThrottlerGuard, ScopeGuard)
@SkipThrottle({ ingest: true })
@RequireScope('rollups:read')
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
  @ApiProblemResponse(
    401,
    'Missing or invalid API key (`invalid_key`), or an ingest key (`wrong_key_type`).',
    ['WWW-Authenticate'],
  )
  @ApiProblemResponse(
    403,
    'The key lacks `rollups:read` (`insufficient_scope`) or has no access to `appId` (`app_forbidden`).',
    ['WWW-Authenticate'],
  )
  @ApiProblemResponse(429, 'Read rate of the key exceeded (`rate_limited`), or too many 401s.', [
    'Retry-After',
  ])
  @ApiProblemResponse(503, 'The database is unavailable. Retry after Retry-After.', ['Retry-After'])
  list(@Query(QueryValidationPipe) query: ListRollupsQueryDto): Promise<RollupRecordDto[]> {
    return this.rollups.list(query);
  }
}
