import { Controller, Get, Header } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { API_TAGS, ApiProblemResponse } from '@app/common/openapi';
import { Readiness, ReadinessService } from './readiness.service';

const CHECK_SCHEMA = {
  type: 'object',
  required: ['status'],
  properties: { status: { type: 'string', enum: ['up', 'down', 'degraded'] } },
};

@ApiTags(API_TAGS.operations)
@Controller()
export class HealthController {
  constructor(private readonly readiness: ReadinessService) {}

  @Get('healthz')
  @Header('Cache-Control', 'no-store')
  @ApiOperation({
    summary: 'Liveness',
    description:
      'Answers 200 while the process runs. Touches no dependency; restart the process if it fails.',
  })
  @ApiOkResponse({
    description: 'The process is alive.',
    schema: {
      type: 'object',
      required: ['status'],
      properties: { status: { type: 'string', enum: ['ok'] } },
      additionalProperties: false,
    },
  })
  liveness(): { status: 'ok' } {
    return { status: 'ok' };
  }

  @Get('readyz')
  @Header('Cache-Control', 'no-store')
  @ApiOperation({
    summary: 'Readiness',
    description:
      'Checks the primary database, the read database when it is a different one, and Redis when ' +
      'configured. An unreachable Redis only degrades readiness: rate limits then count per instance. ' +
      'Answers 503 while the process drains on SIGTERM.',
  })
  @ApiOkResponse({
    description: 'Ready to serve traffic (`degraded` when Redis is unreachable).',
    schema: {
      type: 'object',
      required: ['status', 'checks'],
      properties: {
        status: { type: 'string', enum: ['ok', 'degraded'] },
        checks: { type: 'object', additionalProperties: CHECK_SCHEMA },
      },
    },
  })
  @ApiProblemResponse(
    503,
    'Not ready. `failed` names the failed checks (`database`, `database_read`, `shutdown`); `checks` holds every status.',
    ['Retry-After'],
  )
  ready(): Promise<Readiness> {
    return this.readiness.check();
  }
}
