import { Controller, Get, Inject, Logger, OnApplicationShutdown, Query, Req, Res } from '@nestjs/common';
import { ApiOperation, ApiProduces, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { API_TAGS, ApiProblemResponse, RATE_LIMIT_HEADERS } from '@app/common/openapi';
import { QueryValidationPipe } from '@app/common/query-validation.pipe';
import { requestKey } from '@app/auth/authenticated-request';
import { ReadSlots } from '@app/auth/read-concurrency.interceptor';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { ExportEndpoint } from './export-endpoint.decorator';
import { type BodyPiece, ndjsonBody, parquetBody, writeBody } from './export-body';
import { ExportQueryDto } from './export-query.dto';
import { ExportBudget, ExportPlan, ExportService } from './export.service';
import { admitExport } from './export-budget';
import { stopParquetWorker } from './parquet-worker';

export const NDJSON_TYPE = 'application/x-ndjson; charset=utf-8';
export const PARQUET_TYPE = 'application/vnd.apache.parquet';

const EXPORT_HEADERS = {
  ...RATE_LIMIT_HEADERS,
  'X-Export-From': {
    description: 'Start of the window (receive time, epoch ms), inclusive.',
    schema: { type: 'integer' },
  },
  'X-Export-To': {
    description: 'End of the window (receive time, epoch ms), exclusive: the next window starts here.',
    schema: { type: 'integer' },
  },
} as const;

/** The chunk already read, then the rest: the first chunk is read before the response starts. */
async function* prepend<T>(first: T | undefined, rest: AsyncGenerator<T>): AsyncGenerator<T> {
  if (first) yield first;
  yield* rest;
}

/** `chunks` with its first chunk read now (a fault then is still an error answer). */
async function firstRead<T>(chunks: AsyncGenerator<T>): Promise<AsyncGenerator<T>> {
  const first = await chunks.next();
  return prepend(first.done ? undefined : first.value, chunks);
}

function acceptsGzip(req: Request): boolean {
  return typeof req.headers['accept-encoding'] === 'string' && req.acceptsEncodings('gzip') === 'gzip';
}

@ApiTags(API_TAGS.events)
@Controller('api/v1/export')
export class ExportController implements OnApplicationShutdown {
  private readonly logger = new Logger(ExportController.name);

  constructor(
    private readonly exports: ExportService,
    private readonly readSlots: ReadSlots,
    @Inject(APP_CONFIG) private readonly config: ConfigSlice<'exportIdleTimeoutMs' | 'readTimeMsPerSecond'>,
  ) {}

  /** Stops the instance's Parquet encoding thread, if an export started it. */
  onApplicationShutdown(): Promise<void> {
    return stopParquetWorker();
  }

  @Get()
  @ApiOperation({
    summary: 'Export raw events',
    description:
      'Streams every event of `appId` received in [`from`, `to`), ascending by `receivedAt` then `id`, as NDJSON ' +
      "(one event record per line, with `userKey`, the user's key outside Tally that deletions list; gzip with " +
      '`Accept-Encoding: gzip`) or as one Parquet file. Consecutive windows ' +
      'give every event exactly once. A cut stream resumes with `after=<receivedAt>:<id>` of the last complete ' +
      'record. Needs an API key with the scope `events:export`; one export at a time per key and instance. An ' +
      "export's reads count toward the key's read time per second (429 `rate_limited` while it is spent; an export " +
      'that runs out pauses until the key has time again). A response that the client does not read for ' +
      '`EXPORT_IDLE_TIMEOUT_MS` (default 60 s) is closed.',
  })
  @ApiProduces('application/x-ndjson', PARQUET_TYPE)
  @ApiResponse({
    status: 200,
    description: 'The events of the window: NDJSON lines of event records, or a Parquet file.',
    headers: EXPORT_HEADERS,
    content: {
      'application/x-ndjson': { schema: { type: 'string', description: 'One EventRecord (JSON) per line.' } },
      [PARQUET_TYPE]: { schema: { type: 'string', format: 'binary' } },
    },
  })
  @ApiProblemResponse(
    400,
    'Invalid query parameters (`invalid_query`, with `errors`): a bad `from`, `to`, `after` or `format`, `from` after `to`, or `to` past the export horizon (`out_of_range`).',
  )
  @ExportEndpoint()
  async export(
    @Query(QueryValidationPipe) query: ExportQueryDto,
    @Req() req: Request,
    @Res() res: Response,
  ): Promise<void> {
    const plan = await this.exports.plan(query);
    const keyId = requestKey(req).id;
    const budget = admitExport(this.readSlots, keyId, this.config.readTimeMsPerSecond);
    let release = () => budget.end();
    try {
      const releaseSlot = this.exports.acquire(keyId);
      release = () => {
        releaseSlot();
        budget.end();
      };
      const body = await this.body(plan, budget);
      this.start(req, res, plan);
      const idleTimeoutMs = this.config.exportIdleTimeoutMs;
      if (res.getHeader('Content-Encoding') === 'gzip') {
        const gzip = createGzip();
        const writing = writeBody(body, gzip, { idleTimeoutMs }).then(
          () => gzip.end(),
          (err: Error) => gzip.destroy(err),
        );
        await Promise.all([pipeline(gzip, res), writing]);
      } else {
        await writeBody(body, res, { idleTimeoutMs });
        res.end();
      }
    } catch (err) {
      if (!res.headersSent) throw err;
      // Mid-stream: the status is gone. Cutting the connection tells the client that the body
      // is incomplete; it resumes with after= from its last complete record.
      if (!res.destroyed) {
        this.logger.warn(`export cut short: ${(err as Error).message}`);
        res.destroy();
      }
    } finally {
      release();
    }
  }

  /**
   * The body, with its first chunk already read: a database fault before the status is sent is
   * still a problem+json. The next chunk is read while one is written (ExportService), no more
   * ahead: the socket's own buffer does the rest.
   */
  private async body(plan: ExportPlan, budget: ExportBudget): Promise<AsyncIterable<BodyPiece>> {
    if (plan.format === 'parquet') {
      const chunks = await firstRead(this.exports.copyChunks(plan, { budget }));
      return parquetBody(chunks, plan, { budget, offThread: true });
    }
    return ndjsonBody(await firstRead(this.exports.ndjsonChunks(plan, { budget })));
  }

  private start(req: Request, res: Response, plan: ExportPlan): void {
    res.status(200);
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('X-Export-From', String(plan.window.fromMs));
    res.setHeader('X-Export-To', String(plan.window.toMs));
    if (plan.format === 'parquet') {
      res.setHeader('Content-Type', PARQUET_TYPE);
      const name = `tally-${plan.window.appId}-${plan.window.fromMs}-${plan.window.toMs}.parquet`;
      res.setHeader('Content-Disposition', `attachment; filename="${name}"`);
      return;
    }
    res.setHeader('Content-Type', NDJSON_TYPE);
    res.setHeader('Vary', 'Accept-Encoding');
    if (acceptsGzip(req)) res.setHeader('Content-Encoding', 'gzip');
  }
}
