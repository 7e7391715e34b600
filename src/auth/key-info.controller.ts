import { Controller, Get, Req, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { SkipThrottle } from '@nestjs/throttler';
import type { Request } from 'express';
import { API_KEY_SCHEME, API_TAGS, ApiProblemResponse, RATE_LIMIT_HEADERS } from '@app/common/openapi';
import { KeyThrottlerGuard } from './key-throttler.guard';
import { ApiKeyGuard } from './api-key.guard';
import { requestKey } from './authenticated-request';
import { KeyInfoDto } from './key-info.dto';
import { KeysService } from './keys.service';

/** Lets the holder of an API key see what it grants: no scope needed, read rate limit applies. */
@ApiTags(API_TAGS.key)
@ApiBearerAuth(API_KEY_SCHEME)
@Controller('api/v1/key')
@UseGuards(ApiKeyGuard, KeyThrottlerGuard)
@SkipThrottle({ ingest: true })
export class KeyInfoController {
  constructor(private readonly keys: KeysService) {}

  @Get()
  @ApiOperation({
    summary: 'Describe the presented API key',
    description: 'Any valid API key may call it; no scope is needed. The secret itself is never returned.',
  })
  @ApiOkResponse({ type: KeyInfoDto, headers: RATE_LIMIT_HEADERS })
  @ApiProblemResponse(
    401,
    'Missing or invalid API key (`invalid_key`), or an ingest key (`wrong_key_type`).',
    ['WWW-Authenticate'],
  )
  @ApiProblemResponse(429, 'Read rate of the key exceeded (`rate_limited`), or too many 401s.', [
    'Retry-After',
  ])
  @ApiProblemResponse(503, 'The database is unavailable. Retry after Retry-After.', ['Retry-After'])
  describe(@Req() req: Request): Promise<KeyInfoDto> {
    return this.keys.describe(requestKey(req).id);
  }
}
