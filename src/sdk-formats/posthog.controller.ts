import { Controller, Post, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import type { Request } from 'express';
import { requestKey } from '@app/auth/authenticated-request';
import { API_TAGS, INGEST_KEY_SCHEME } from '@app/common/openapi';
import { IngestBodyReader } from '@app/ingest/ingest-body.reader';
import { IngestCpuBudgets } from '@app/ingest/ingest-cpu.budget';
import { declaredBytes } from '@app/common/http/json-body';
import { postHogMapping } from './posthog.mapping';
import { SdkIngestEndpoint } from './sdk-endpoint.decorator';
import { SdkIngestService, type SdkIngestResult } from './sdk-ingest.service';
import { postHogFormat, preReadBody, PostHogKeyGuard } from './sdk-key.guard';
import { PostHogResultDto } from './sdk-result.dto';

/** PostHog's capture API, for apps that send with PostHog's SDKs (docs/sdks.md). */
@ApiTags(API_TAGS.ingest)
@ApiBearerAuth(INGEST_KEY_SCHEME)
@Controller('api/posthog')
export class PostHogController {
  constructor(
    private readonly reader: IngestBodyReader,
    private readonly sdk: SdkIngestService,
    private readonly cpu: IngestCpuBudgets,
  ) {}

  @Post(['batch', 'capture', 'e', 'i/v0/e'])
  @ApiOperation({
    summary: 'Ingest in the PostHog format',
    description:
      'Takes `{ "api_key", "batch": [event…], "sent_at"? }`, one event, or an array of events, with or ' +
      'without a trailing slash. The ingest key is `api_key` (or `token`) in the body, or a Bearer header. ' +
      'Each event becomes a Tally event and takes the path of POST /api/ingest; `$identify`, `$create_alias`, ' +
      '`$groupidentify` and `$set` are acknowledged and not stored. `Content-Encoding: gzip` is accepted.',
  })
  @ApiQuery({
    name: 'compression',
    required: false,
    enum: ['gzip-js'],
    description: 'The body is gzip whatever its Content-Type and Content-Encoding (as posthog-js sends it).',
  })
  @SdkIngestEndpoint(PostHogKeyGuard, PostHogResultDto, 'A PostHog batch, one event, or an array of events.')
  async capture(@Req() req: Request): Promise<SdkIngestResult & { status: 1 }> {
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
        : await this.reader.read(req, key.id, meter, postHogFormat(req));
      const result = await this.sdk.run('posthog', key, body, postHogMapping, meter);
      return { ...result, status: 1 };
    } finally {
      this.cpu.charge(key.id, meter);
    }
  }
}
