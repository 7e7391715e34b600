import { Controller, HttpCode, Post, Req, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiConsumes, ApiTags } from '@nestjs/swagger';
import { SkipThrottle } from '@nestjs/throttler';
import type { Request } from 'express';
import { IngestKeyGuard } from '@app/auth/ingest-key.guard';
import { requestKey } from '@app/auth/authenticated-request';
import { KeyThrottlerGuard } from '@app/common/rate-limit/key-throttler.guard';
import { IngestBodyReader } from './ingest-body.reader';
import { IngestBatchDto } from './ingest.dto';
import { IngestService } from './ingest.service';
import type { IngestResult } from './ingest.types';

@ApiTags('ingest')
@ApiBearerAuth()
@Controller('api/ingest')
@UseGuards(IngestKeyGuard, KeyThrottlerGuard)
@SkipThrottle({ read: true })
export class IngestController {
  constructor(
    private readonly reader: IngestBodyReader,
    private readonly service: IngestService,
  ) {}

  @Post()
  @HttpCode(200)
  @ApiConsumes('application/json')
  @ApiBody({ type: IngestBatchDto })
  async ingest(@Req() req: Request): Promise<IngestResult> {
    // The body is read here, after the guards, never by a global parser.
    const body = await this.reader.read(req);
    return this.service.ingest(requestKey(req), body);
  }
}
