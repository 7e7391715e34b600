import { Controller, Get, Query, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { SkipThrottle } from '@nestjs/throttler';
import { ApiKeyGuard } from '@app/auth/api-key.guard';
import { RequireScope, ScopeGuard } from '@app/auth/scope.guard';
import { KeyThrottlerGuard } from '@app/common/rate-limit/key-throttler.guard';
import { QueryValidationPipe } from '@app/events/query-validation.pipe';
import { ListRollupsQueryDto } from './list-rollups-query.dto';
import { RollupRecordDto } from './rollup-record.dto';
import { RollupsService } from './rollups.service';

@ApiTags('rollups')
@ApiBearerAuth()
@Controller('api/v1/rollups')
@UseGuards(ApiKeyGuard, KeyThrottlerGuard, ScopeGuard)
@SkipThrottle({ ingest: true })
@RequireScope('rollups:read')
export class RollupsController {
  constructor(private readonly rollups: RollupsService) {}

  @Get()
  @ApiOkResponse({ type: RollupRecordDto, isArray: true })
  list(@Query(QueryValidationPipe) query: ListRollupsQueryDto): Promise<RollupRecordDto[]> {
    return this.rollups.list(query);
  }
}
