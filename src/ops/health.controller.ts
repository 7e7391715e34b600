import { Controller, Get, Header } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { API_TAGS, ApiProblemResponse } from '@app/common/openapi';
import { Readiness, ReadinessService } from './readiness.service';

const CHECK_SCHEMA = {
  type: 'object',
  required: ['status'],
  properties: {
    status: { type: 'string', enum: ['up', 'down', 'degraded'] },
    target: {
      type: 'string',
      enum: ['replica', 'primary'],
      description: '`database_read` only: the database that serves reads now.',
    },
    lagSeconds: {
      type: ['number', 'null'],
      description: "`database_read` only: the replica's lag at the last check; null when it was unreachable.",
    },
  },
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
      'Checks the primary database, and Redis when configured. An unreachable Redis only degrades ' +
      'readiness: rate limits then count per instance. With a read replica (`DATABASE_READ_URL`), ' +
      "`database_read` reports where reads go now (`target`) and the replica's last lag (`lagSeconds`); " +
      'it is `degraded` while reads are on the primary, which never makes the service unready. ' +
      'Answers 503 while the process drains on SIGTERM.',
  })
  @ApiOkResponse({
    description:
      'Ready to serve traffic (`degraded` when Redis is unreachable or reads are off the replica).',
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
    'Not ready. `failed` names the failed checks (`database`, `shutdown`); `checks` holds every status.',
    ['Retry-After'],
  )
  ready(): Promise<Readiness> {
    return this.readiness.check();
  }
}
