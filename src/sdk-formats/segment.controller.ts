import { Controller, Param, Post, Req } from '@nestjs/common';
import { ApiBasicAuth, ApiBearerAuth, ApiOperation, ApiParam, ApiTags } from '@nestjs/swagger';
import type { Request } from 'express';
import { requestKey } from '@app/auth/authenticated-request';
import { AppError } from '@app/common/app-error';
import { API_TAGS, INGEST_KEY_SCHEME, SEGMENT_KEY_SCHEME } from '@app/common/openapi';
import { IngestBodyReader } from '@app/ingest/ingest-body.reader';
import { IngestCpuBudgets } from '@app/ingest/ingest-cpu.budget';
import { declaredBytes } from '@app/common/http/json-body';
import { SdkIngestEndpoint } from './sdk-endpoint.decorator';
import { SdkIngestService, type SdkIngestResult } from './sdk-ingest.service';
import { preReadBody, SEGMENT_FORMAT, SegmentKeyGuard } from './sdk-key.guard';
import { SegmentResultDto } from './sdk-result.dto';
import { segmentMapping, SEGMENT_ENDPOINTS, type SegmentEndpoint } from './segment.mapping';

const ENDPOINTS = Object.keys(SEGMENT_ENDPOINTS);

/** Segment's HTTP Tracking API, for apps that send with Segment's SDKs (docs/sdks.md). */
@ApiTags(API_TAGS.ingest)
@ApiBasicAuth(SEGMENT_KEY_SCHEME)
@ApiBearerAuth(INGEST_KEY_SCHEME)
@Controller('api/segment/v1')
export class SegmentController {
  constructor(
    private readonly reader: IngestBodyReader,
    private readonly sdk: SdkIngestService,
    private readonly cpu: IngestCpuBudgets,
  ) {}

  @Post(':endpoint')
  @ApiOperation({
    summary: 'Ingest in the Segment format',
    description:
      '`batch` and `b` take `{ "batch": [message…], "sentAt"?, "context"? }`; `track`/`t`, `page`/`p`, ' +
      '`screen`/`s`, `identify`/`i`, `group`/`g` and `alias`/`a` take one message. The ingest key is the ' +
      'write key: HTTP Basic user name (empty password), `writeKey` in the body, or a Bearer header. Each ' +
      'message becomes a Tally event and takes the path of POST /api/ingest; identify, group and alias are ' +
      'acknowledged and not stored. `Content-Encoding: gzip` is accepted.',
  })
  @ApiParam({ name: 'endpoint', enum: ENDPOINTS, description: 'The Tracking API method.' })
  @SdkIngestEndpoint(SegmentKeyGuard, SegmentResultDto, 'A Segment batch or a single message.')
  async ingest(
    @Req() req: Request,
    @Param('endpoint') endpoint: string,
  ): Promise<SdkIngestResult & { success: true }> {
    if (!Object.hasOwn(SEGMENT_ENDPOINTS, endpoint)) {
      throw new AppError('not_found', `No Segment endpoint ${endpoint}; see docs/sdks.md.`);
    }
    const key = requestKey(req);
    const meter = await this.cpu.enter(key.id, declaredBytes(req.headers));
    try {
      const early = preReadBody(req);
      if (early) {
        // The read before the key was known is the key's CPU too.
        meter.ms += early.cpu.ms;
        await meter.beginTurn();
      }
      const body = early
        ? meter.time(() => early.body())
        : await this.reader.read(req, key.id, meter, SEGMENT_FORMAT);
      const map = (value: unknown, pseudonym: (id: string) => string) =>
        typeof value === 'object' && value !== null && !Array.isArray(value)
          ? segmentMapping(endpoint as SegmentEndpoint, value as Record<string, unknown>, pseudonym)
          : null;
      const result = await this.sdk.run('segment', key, body, map, meter);
      return { ...result, success: true };
    } finally {
      this.cpu.charge(key.id, meter);
    }
  }
}
