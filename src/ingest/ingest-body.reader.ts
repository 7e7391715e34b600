import { Inject, Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { isUtf8 } from 'node:buffer';
import { pipeline, Readable, Transform, TransformCallback } from 'node:stream';
import { createGunzip } from 'node:zlib';
import getRawBody from 'raw-body';
import { AppError } from '@app/common/app-error';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { BatchLimits, batchTooLarge } from './ingest-errors';
import { CpuMeter } from './ingest-cpu.budget';

export interface IngestBody {
  /** The parsed JSON document. */
  value: unknown;
  /** Decoded (decompressed) size in bytes. */
  bytes: number;
}

type Encoding = 'identity' | 'gzip';

/** How the SDK formats' bodies differ from `POST /api/ingest`'s. */
export interface BodyFormat {
  /** `text/plain` is taken as JSON too (browser SDKs send it to avoid a CORS preflight). */
  textPlain?: boolean;
  /** The body is gzip whatever its headers say (PostHog's `?compression=gzip-js`). */
  gzip?: boolean;
}

// gzip adds a few bytes per 16 KiB block to data that does not compress, so an honest gzip
// body can be slightly larger than its decoded size.
const GZIP_SLACK_BYTES = 64 * 1024;

// Bodies in flight drain within a few hundred milliseconds under load.
const OVERLOAD_RETRY_AFTER_SECONDS = 1;

function hasBom(b: Buffer): boolean {
  return b.length >= 3 && b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf;
}

function mediaTypeOk(header: string | undefined, textPlain = false): boolean {
  if (!header) return false;
  const [type, ...params] = header.split(';');
  const media = type.trim().toLowerCase();
  if (media !== 'application/json' && !(textPlain && media === 'text/plain')) return false;
  for (const param of params) {
    const [name, value = ''] = param.split('=');
    if (name.trim().toLowerCase() !== 'charset') continue;
    const charset = value.trim().replace(/^"|"$/g, '').toLowerCase();
    if (charset !== 'utf-8' && charset !== 'utf8') return false;
  }
  return true;
}

function encodingOf(header: string | undefined): Encoding | null {
  const value = (header ?? '').trim().toLowerCase();
  if (value === '' || value === 'identity') return 'identity';
  if (value === 'gzip' || value === 'x-gzip') return 'gzip';
  return null;
}

function endedEarly(): AppError {
  return new AppError('invalid_body', 'The request body ended early.');
}

interface UploadPace {
  /** Raw (on the wire) bytes past which the upload is refused. */
  rawLimit: number;
  idleMs: number;
  /** Bytes per second each INGEST_BODY_IDLE_MS window must bring; 0 turns the check off. */
  minBytesPerSecond: number;
  tooLarge: (rawBytes: number) => AppError;
  /** For a plain body, whose raw bytes are its decoded bytes: the in-flight budget. */
  take?: (bytes: number) => AppError | null;
}

/**
 * Passes the raw upload through and ends it with 408 when it stalls (no byte for `idleMs`) or
 * crawls (fewer than `minBytesPerSecond` over a window of `idleMs`), and with 413 past
 * `rawLimit` (a gzip stream of empty members decodes to nothing however long it is).
 */
class UploadWatch extends Transform {
  private raw = 0;
  private lastByteAt = Date.now();
  private windowStart = this.lastByteAt;
  private windowBytes = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly pace: UploadPace) {
    super();
    // eslint-disable-next-line no-restricted-globals -- one request's idle watchdog, not background work.
    this.timer = setInterval(() => this.check(), Math.max(25, Math.min(1000, pace.idleMs / 4)));
  }

  private check(): void {
    const now = Date.now();
    if (now - this.lastByteAt >= this.pace.idleMs) {
      this.destroy(
        new AppError(
          'body_timeout',
          `No body byte arrived for ${this.pace.idleMs} ms; nothing was stored. Retry the request.`,
          { headers: { Connection: 'close' } },
        ),
      );
      return;
    }
    const elapsed = now - this.windowStart;
    if (elapsed < this.pace.idleMs) return;
    if (this.windowBytes * 1000 < this.pace.minBytesPerSecond * elapsed) {
      this.destroy(
        new AppError(
          'body_timeout',
          `The body arrived slower than ${this.pace.minBytesPerSecond} bytes/s; nothing was stored.`,
          { headers: { Connection: 'close' } },
        ),
      );
      return;
    }
    this.windowStart = now;
    this.windowBytes = 0;
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.raw += chunk.length;
    if (this.raw > this.pace.rawLimit) return done(this.pace.tooLarge(this.raw));
    this.lastByteAt = Date.now();
    this.windowBytes += chunk.length;
    done(this.pace.take?.(chunk.length) ?? null, chunk);
  }

  override _flush(done: TransformCallback): void {
    clearInterval(this.timer);
    done();
  }

  override _destroy(err: Error | null, done: (error?: Error | null) => void): void {
    clearInterval(this.timer);
    done(err);
  }
}

/** Counts decoded bytes against the in-flight budget; fails with its 429 or 503 once over. */
class BudgetMeter extends Transform {
  constructor(private readonly takeBytes: (bytes: number) => AppError | null) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    done(this.takeBytes(chunk.length), chunk);
  }
}

/** Maps what the read pipeline failed with to the answer the client gets. */
function readError(err: unknown, config: BatchLimits, limit: number): AppError {
  if (err instanceof AppError) return err;
  const e = err as { type?: string; received?: number; code?: string };
  if (e.type === 'entity.too.large') {
    return batchTooLarge(
      config,
      { events: null, bytes: e.received ?? limit + 1 },
      `The decoded body exceeds ${limit} bytes; reading stopped.`,
      { Connection: 'close' },
    );
  }
  if (typeof e.code === 'string' && e.code.startsWith('Z_')) {
    return new AppError('invalid_body', 'The gzip body is corrupt or truncated.');
  }
  return endedEarly();
}

function parseBody(buffer: Buffer): IngestBody {
  if (!isUtf8(buffer)) throw new AppError('invalid_json', 'The body is not valid UTF-8.');
  // A byte order mark is tolerated, as JSON parsers commonly do.
  const text = buffer.toString('utf8', hasBom(buffer) ? 3 : 0);
  try {
    return { value: JSON.parse(text), bytes: buffer.length };
  } catch (err) {
    throw new AppError('invalid_json', `The body is not valid JSON: ${(err as Error).message}`);
  }
}

/**
 * Reads the ingest body from the request stream. It runs in the handler, after the key guards,
 * so that an unauthenticated client never makes the service read or decompress anything.
 * Decompression streams and stops at INGEST_MAX_BYTES of output: a gzip bomb costs at most
 * that much memory and time before the 413.
 */
@Injectable()
export class IngestBodyReader {
  /** Decoded body bytes of the requests not yet answered, on this instance. */
  private inFlight = 0;
  /** The same, per key: one key may hold at most INGEST_MAX_INFLIGHT_BYTES_PER_KEY of it. */
  private readonly inFlightByKey = new Map<string, number>();

  constructor(
    @Inject(APP_CONFIG)
    private readonly config: BatchLimits &
      ConfigSlice<
        | 'ingestMaxInflightBytes'
        | 'ingestMaxInflightBytesPerKey'
        | 'ingestBodyIdleMs'
        | 'ingestBodyMinBytesPerSecond'
      >,
  ) {}

  /** Decoded body bytes held right now (reported by /metrics). */
  get inFlightBytes(): number {
    return this.inFlight;
  }

  /**
   * Counts a request's decoded bytes against INGEST_MAX_INFLIGHT_BYTES, and against the key's
   * share of it, until its response is over. Parsed events take several times their JSON size
   * in memory, so this bounds the memory that a burst of large batches can take. Past the key's
   * share, its new bodies get 429, so that one key's stalled or slow uploads leave room for the
   * other apps; past the instance's budget, 503. Returns `take(bytes)`: the error, or null.
   */
  private account(req: Request, keyId: string): (bytes: number) => AppError | null {
    const res = req.res;
    // Already over (the client left during the guards): nothing would give the bytes back, and
    // the read fails anyway.
    if (!res || res.closed) return () => null;
    let held = 0;
    res.once('close', () => {
      this.inFlight -= held;
      const left = (this.inFlightByKey.get(keyId) ?? 0) - held;
      if (left > 0) this.inFlightByKey.set(keyId, left);
      else this.inFlightByKey.delete(keyId);
      held = 0;
    });
    return (bytes) => {
      held += bytes;
      this.inFlight += bytes;
      const byKey = (this.inFlightByKey.get(keyId) ?? 0) + bytes;
      this.inFlightByKey.set(keyId, byKey);
      if (this.inFlight > this.config.ingestMaxInflightBytes) {
        return new AppError(
          'service_unavailable',
          'The server holds as many ingest bodies as it may at once; nothing was stored. Retry after Retry-After.',
          { headers: { 'Retry-After': String(OVERLOAD_RETRY_AFTER_SECONDS), Connection: 'close' } },
        );
      }
      if (byKey > this.config.ingestMaxInflightBytesPerKey) {
        return new AppError(
          'rate_limited',
          'This key already has as many ingest bodies in flight as it may; nothing was stored. Retry after Retry-After.',
          {
            headers: { 'Retry-After': String(OVERLOAD_RETRY_AFTER_SECONDS), Connection: 'close' },
            extra: { limitInflightBytes: this.config.ingestMaxInflightBytesPerKey },
          },
        );
      }
      return null;
    };
  }

  async read(
    req: Request,
    keyId: string,
    cpu = new CpuMeter(),
    format: BodyFormat = {},
  ): Promise<IngestBody> {
    if (!format.gzip && !mediaTypeOk(req.headers['content-type'], format.textPlain)) {
      throw new AppError(
        'unsupported_media_type',
        'Send the batch as Content-Type: application/json (UTF-8).',
      );
    }
    const encoding = format.gzip ? 'gzip' : encodingOf(req.headers['content-encoding']);
    if (!encoding) {
      throw new AppError('unsupported_encoding', 'Content-Encoding must be gzip or identity.', {
        headers: { 'Accept-Encoding': 'gzip, identity' },
      });
    }
    const limit = this.config.ingestMaxBytes;
    const rawLimit = encoding === 'gzip' ? limit + GZIP_SLACK_BYTES : limit;
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > rawLimit) {
      // Refused unread; closing the connection spares the server the rest of the upload.
      throw batchTooLarge(
        this.config,
        { events: null, bytes: declared },
        `The body is ${declared} bytes; the limit is ${limit}.`,
        { Connection: 'close' },
      );
    }
    const buffer = await this.collect(req, encoding, limit, rawLimit, this.account(req, keyId));
    cpu.chargeBody(buffer.length);
    // Parsing is the first of the request's CPU work, done in the key's turn (IngestCpuBudgets).
    await cpu.beginTurn();
    return cpu.time(() => parseBody(buffer));
  }

  private async collect(
    req: Request,
    encoding: Encoding,
    limit: number,
    rawLimit: number,
    take: (bytes: number) => AppError | null,
  ): Promise<Buffer> {
    const watch = new UploadWatch({
      rawLimit,
      take: encoding === 'identity' ? take : undefined,
      idleMs: this.config.ingestBodyIdleMs,
      minBytesPerSecond: this.config.ingestBodyMinBytesPerSecond,
      tooLarge: (raw) =>
        batchTooLarge(
          this.config,
          { events: null, bytes: encoding === 'gzip' ? limit + 1 : raw },
          `The body exceeds ${limit} bytes; reading stopped.`,
          { Connection: 'close' },
        ),
    });
    // A gzip body is decoded by a pipeline, whose errors reach getRawBody through its last
    // stream; a plain body is read from the watch itself (one stream less per request).
    const decoded: Readable =
      encoding === 'gzip' ? pipeline(watch, createGunzip(), new BudgetMeter(take), () => undefined) : watch;
    // The request stays outside the pipeline: destroying it would close the socket before the
    // error answer (413, 408, 429, 503) could be sent.
    const onAbort = () => watch.destroy(endedEarly());
    const onClose = () => {
      if (!req.complete) onAbort();
    };
    req.on('error', onAbort);
    req.on('close', onClose);
    req.pipe(watch);
    try {
      return await getRawBody(decoded, { limit });
    } catch (err) {
      req.unpipe(watch);
      // Let the rest of the upload drain unread; nothing more is buffered.
      req.resume();
      watch.destroy();
      throw readError(err, this.config, limit);
    } finally {
      req.off('error', onAbort);
      req.off('close', onClose);
    }
  }
}
