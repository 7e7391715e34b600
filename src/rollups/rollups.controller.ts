import { Controller, Get, Query, UseGuards, UseInterceptors } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import {
  API_KEY_SCHEME,
  API_TAGS,
  ApiProblemResponse,
  ApiReadErrors,
  RATE_LIMIT_HEADERS,
} from '@app/ops/openapi';
import { SkipThrottle } from '@nestjs/throttler';
import { ApiKeyGuard } from '@app/auth/api-key.guard';
import { RequireScope, ScopeGuard } from '@app/auth/scope.guard';
import { KeyThrottlerGuard } from '@app/common/rate-limit/key-throttler.guard';
import { ReadConcurrencyInterceptor } from '@app/common/rate-limit/read-concurrency.interceptor';
import { ReadTimeoutInterceptor } from '@app/common/read-timeout.interceptor';
import { QueryValidationPipe } from '@app/common/query-validation.pipe';
import { ListRollupsQueryDto } from './list-rollups-query.dto';
import { RollupRecordDto } from './rollup-record.dto';
import { RollupsService } from './rollups.service';

@ApiTags(API_TAGS.rollups)
@ApiBearerAuth(API_KEY_SCHEME)
@Controller('api/v1/rollups')
@UseGuards(ApiKeyGuard, KeyThrottlerGuard, ScopeGuard)
@UseInterceptors(ReadConcurrencyInterceptor, ReadTimeoutInterceptor)
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
  @ApiReadErrors('rollups:read')
  list(@Query(QueryValidationPipe) query: ListRollupsQueryDto): Promise<RollupRecordDto[]> {
    return this.rollups.list(query);
  }
}
