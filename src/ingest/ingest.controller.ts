import { Controller, HttpCode, Post, Req, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiConsumes, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { SkipThrottle } from '@nestjs/throttler';
import type { Request } from 'express';
import { IngestKeyGuard } from '@app/auth/ingest-key.guard';
import { requestKey } from '@app/auth/authenticated-request';
import { KeyThrottlerGuard } from '@app/auth/key-throttler.guard';
import { IngestBodyReader } from './ingest-body.reader';
import { API_TAGS, ApiProblemResponse, INGEST_KEY_SCHEME, RATE_LIMIT_HEADERS } from '@app/common/openapi';
import { IngestBatchDto } from './ingest.dto';
import { IngestResultDto } from './ingest-result.dto';
import { IngestService } from './ingest.service';
import { DRAIN_BOUND_MS, IngestCpuBudgets } from './ingest-cpu.budget';
import { declaredBytes } from '@app/common/http/json-body';
import type { IngestResult } from './ingest.types';

@ApiTags(API_TAGS.ingest)
@ApiBearerAuth(INGEST_KEY_SCHEME)
@Controller('api/ingest')
@UseGuards(IngestKeyGuard, KeyThrottlerGuard)
@SkipThrottle({ read: true })
export class IngestController {
  constructor(
    private readonly reader: IngestBodyReader,
    private readonly service: IngestService,
    private readonly cpu: IngestCpuBudgets,
  ) {}

  @Post()
  @HttpCode(200)
  @ApiOperation({
    summary: 'Ingest a batch of events',
    description:
      'Validates every event, stores the valid ones in one transaction and answers with a per-event ' +
      'metering result. 200 is sent only after the commit. `Content-Encoding: gzip` is accepted.',
  })
  @ApiConsumes('application/json')
  @ApiBody({ type: IngestBatchDto })
  @ApiOkResponse({
    type: IngestResultDto,
    description: 'The batch metering result.',
    headers: RATE_LIMIT_HEADERS,
  })
  @ApiProblemResponse(400, 'Invalid JSON or batch envelope (`invalid_json`, `invalid_body`); nothing stored.')
  @ApiProblemResponse(
    401,
    'Missing or invalid ingest key (`invalid_key`), or an API key (`wrong_key_type`).',
    ['WWW-Authenticate'],
  )
  @ApiProblemResponse(
    408,
    'The body stalled for INGEST_BODY_IDLE_MS, or arrived slower than INGEST_BODY_MIN_BYTES_PER_SECOND ' +
      '(`body_timeout`); nothing stored, the connection is closed. Retry the request.',
  )
  @ApiProblemResponse(
    413,
    'More than INGEST_MAX_EVENTS events or INGEST_MAX_BYTES decoded bytes; nothing stored. The body has ' +
      '`limitEvents`, `limitBytes`, `receivedEvents` and `receivedBytes`: split the batch.',
  )
  @ApiProblemResponse(
    415,
    'Content-Type is not application/json, or the Content-Encoding is not gzip or identity.',
  )
  @ApiProblemResponse(
    429,
    `Request or event rate of the key exceeded, its requests already waiting would take more than ${DRAIN_BOUND_MS} ms ` +
      'at its share of server CPU (INGEST_CPU_MS_PER_SECOND), the key already holds INGEST_MAX_INFLIGHT_BYTES_PER_KEY of bodies in flight, ' +
      'or too many invalid keys; nothing stored.',
    ['Retry-After'],
  )
  @ApiProblemResponse(
    503,
    'The database is unavailable, or the instance already holds INGEST_MAX_INFLIGHT_BYTES of ingest ' +
      'bodies; nothing stored. Retry after Retry-After.',
    ['Retry-After'],
  )
  async ingest(@Req() req: Request): Promise<IngestResult> {
    // The body is read here, after the guards, never by a global parser.
    const key = requestKey(req);
    const meter = await this.cpu.enter(key.id, declaredBytes(req.headers));
    try {
      const body = await this.reader.read(req, key.id, meter);
      return await this.service.ingest(key, body, meter);
    } finally {
      this.cpu.charge(key.id, meter);
    }
  }
}
