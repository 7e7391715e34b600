import { Controller, Get, Header, Res } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { API_TAGS } from '@app/common/openapi';
import { MetricsService } from '@app/common/metrics/metrics.service';

@ApiTags(API_TAGS.operations)
@Controller('metrics')
export class MetricsController {
  constructor(private readonly metrics: MetricsService) {}

  @Get()
  @Header('Cache-Control', 'no-store')
  @ApiOperation({
    summary: 'Prometheus metrics',
    description:
      'Request counts and latencies by route template and status, events accepted, duplicate and ' +
      'rejected, rollup runs and lag, database pool usage, and process metrics. No tenant data.',
  })
  @ApiOkResponse({
    description: 'Prometheus text exposition format.',
    content: { 'text/plain': { schema: { type: 'string' } } },
  })
  async scrape(@Res() res: Response): Promise<void> {
    const body = await this.metrics.render();
    res.status(200).type(this.metrics.contentType).send(body);
  }
}
