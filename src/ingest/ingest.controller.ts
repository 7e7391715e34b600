import { Controller, HttpCode, Post, Req, UseGuards } from '@nestjs/common';
import { SkipThrottle } from '@nestjs/throttler';
import type { Request } from 'express';
import { IngestKeyGuard } from '@app/auth/ingest-key.guard';
import { requestKey } from '@app/auth/authenticated-request';
import { KeyThrottlerGuard } from '@app/common/rate-limit/key-throttler.guard';

@Controller('api/ingest')
@UseGuards(IngestKeyGuard, KeyThrottlerGuard)
@SkipThrottle({ read: true })
export class IngestController {
  @Post()
  @HttpCode(200)
  ingest(@Req() req: Request) {
    const key = requestKey(req);
    return { received: 0, appId: key.appIds[0] };
  }
}
