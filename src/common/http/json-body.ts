import type { Request } from 'express';
import { isUtf8 } from 'node:buffer';
import { pipeline, Readable, Transform, TransformCallback } from 'node:stream';
import { createGunzip } from 'node:zlib';
import getRawBody from 'raw-body';
import { AppError } from '@app/common/app-error';

/** A JSON request body, parsed. */
export interface JsonBody {
  /** The parsed JSON document. */
  value: unknown;
  /** Decoded (decompressed) size in bytes. */
  bytes: number;
}

/** How a body may differ from plain `application/json`. */
export interface BodyFormat {
  /** `text/plain` is taken as JSON too (browser SDKs send it to avoid a CORS preflight). */
  textPlain?: boolean;
  /** The body is gzip whatever its headers say (PostHog's `?compression=gzip-js`). */
  gzip?: boolean;
}

/** Takes `bytes` more decoded bytes against a budget: the error once over it, else null. */
export type ByteBudget = (bytes: number) => AppError | null;

/** What an endpoint allows its body. */
export interface JsonBodyLimits {
  /** Decoded bytes past which the body is refused (413). */
  maxBytes: number;
  /** The 413 to answer, for a body of at least `bytes` bytes. */
  tooLarge: (bytes: number, detail: string) => AppError;
  /** 408 when no byte arrives for `idleMs`, or fewer than `minBytesPerSecond` over that window. */
  pace?: { idleMs: number; minBytesPerSecond: number };
  /** Opened once the headers are accepted: the budget the decoded bytes are counted against. */
  budget?: () => ByteBudget;
  /** A look at the body's first bytes before the rest is read (BodyPeek). */
  peek?: BodyPeek;
}

/**
 * A look at the first `bytes` raw bytes of a body, as they arrive: the read waits for `check`,
 * and ends with the error it returns or throws, as it is, without reading the rest (a body
 * shorter than `bytes` is not looked at). A body whose key is inside it can be refused this way
 * for its first bytes.
 */
export interface BodyPeek {
  bytes: number;
  check(prefix: Buffer): Promise<AppError | null>;
}

type Encoding = 'identity' | 'gzip';

// gzip adds a few bytes per 16 KiB block to data that does not compress, so an honest gzip
// body can be slightly larger than its decoded size.
const GZIP_SLACK_BYTES = 64 * 1024;

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
  /** Bytes per second each `idleMs` window must bring; 0 turns the check off. */
  minBytesPerSecond: number;
  tooLarge: (rawBytes: number) => AppError;
  /** For a plain body, whose raw bytes are its decoded bytes: the byte budget. */
  take?: ByteBudget;
  peek?: BodyPeek;
}

/**
 * Passes the raw upload through and ends it with 408 when it stalls (no byte for `idleMs`) or
 * crawls (fewer than `minBytesPerSecond` over a window of `idleMs`), and with 413 past
 * `rawLimit` (a gzip stream of empty members decodes to nothing however long it is). With no
 * `idleMs`, only the size is watched.
 */
class UploadWatch extends Transform {
  private raw = 0;
  private lastByteAt = Date.now();
  private windowStart = this.lastByteAt;
  private windowBytes = 0;
  private readonly timer: NodeJS.Timeout | undefined;
  /** What arrived of the body before the peek has looked; none once it has. */
  private prefix: Buffer[] | null;
  /** What the peek's check threw: rethrown as it is, never mapped to a read error. */
  failure: unknown = null;

  constructor(private readonly pace: UploadPace) {
    super();
    this.prefix = pace.peek ? [] : null;
    if (pace.idleMs > 0) {
      // eslint-disable-next-line no-restricted-globals -- one request's idle watchdog, not background work.
      this.timer = setInterval(() => this.check(), Math.max(25, Math.min(1000, pace.idleMs / 4)));
    }
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
    const refused = this.pace.take?.(chunk.length) ?? null;
    if (refused !== null || this.prefix === null) return done(refused, chunk);
    this.prefix.push(chunk);
    if (this.raw < this.pace.peek!.bytes) return done(null, chunk);
    const prefix = this.prefix.length === 1 ? this.prefix[0] : Buffer.concat(this.prefix);
    this.prefix = null;
    this.pace.peek!.check(prefix).then(
      (error) => done(error, error === null ? chunk : undefined),
      (failure: unknown) => {
        this.failure = failure;
        done(failure as Error);
      },
    );
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

/** Counts decoded bytes against the budget; fails with its error once over. */
class BudgetMeter extends Transform {
  constructor(private readonly takeBytes: ByteBudget) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    done(this.takeBytes(chunk.length), chunk);
  }
}

/** Maps what the read pipeline failed with to the answer the client gets. */
function readError(err: unknown, limits: JsonBodyLimits): AppError {
  if (err instanceof AppError) return err;
  const e = err as { type?: string; received?: number; code?: string };
  if (e.type === 'entity.too.large') {
    const detail = `The decoded body exceeds ${limits.maxBytes} bytes; reading stopped.`;
    return limits.tooLarge(e.received ?? limits.maxBytes + 1, detail);
  }
  if (typeof e.code === 'string' && e.code.startsWith('Z_')) {
    return new AppError('invalid_body', 'The gzip body is corrupt or truncated.');
  }
  return endedEarly();
}

/** The body's bytes as JSON: 400 `invalid_json` when they are not UTF-8 or not JSON. */
export function parseJsonBody(buffer: Buffer): JsonBody {
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
 * Reads a request's body (the server has no global body parser): 415 for a type other than
 * JSON in UTF-8 or an unknown encoding, 413 past `maxBytes` of decoded bytes. Decompression
 * streams and stops at `maxBytes` of output, so a gzip bomb costs at most that much memory and
 * time before the 413.
 */
export async function readBodyBytes(
  req: Request,
  limits: JsonBodyLimits,
  format: BodyFormat = {},
): Promise<Buffer> {
  if (!format.gzip && !mediaTypeOk(req.headers['content-type'], format.textPlain)) {
    throw new AppError('unsupported_media_type', 'Send the body as Content-Type: application/json (UTF-8).');
  }
  const encoding = format.gzip ? 'gzip' : encodingOf(req.headers['content-encoding']);
  if (!encoding) {
    throw new AppError('unsupported_encoding', 'Content-Encoding must be gzip or identity.', {
      headers: { 'Accept-Encoding': 'gzip, identity' },
    });
  }
  const limit = limits.maxBytes;
  const rawLimit = encoding === 'gzip' ? limit + GZIP_SLACK_BYTES : limit;
  const declared = declaredBytes(req.headers);
  if (declared !== undefined && declared > rawLimit) {
    // Refused unread; closing the connection spares the server the rest of the upload.
    throw limits.tooLarge(declared, `The body is ${declared} bytes; the limit is ${limit}.`);
  }
  return collect(req, encoding, rawLimit, limits, limits.budget?.() ?? (() => null));
}

/** The body size a request declares (Content-Length), if any. */
export function declaredBytes(headers: Request['headers']): number | undefined {
  const length = Number(headers['content-length']);
  return Number.isSafeInteger(length) && length >= 0 ? length : undefined;
}

/** Reads and parses a JSON body: `readBodyBytes`, then `parseJsonBody`. */
export async function readJsonBody(
  req: Request,
  limits: JsonBodyLimits,
  format?: BodyFormat,
): Promise<JsonBody> {
  return parseJsonBody(await readBodyBytes(req, limits, format));
}

async function collect(
  req: Request,
  encoding: Encoding,
  rawLimit: number,
  limits: JsonBodyLimits,
  take: ByteBudget,
): Promise<Buffer> {
  const limit = limits.maxBytes;
  const watch = new UploadWatch({
    rawLimit,
    take: encoding === 'identity' ? take : undefined,
    peek: limits.peek,
    idleMs: limits.pace?.idleMs ?? 0,
    minBytesPerSecond: limits.pace?.minBytesPerSecond ?? 0,
    tooLarge: (raw) =>
      limits.tooLarge(
        encoding === 'gzip' ? limit + 1 : raw,
        `The body exceeds ${limit} bytes; reading stopped.`,
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
    throw watch.failure ?? readError(err, limits);
  } finally {
    req.off('error', onAbort);
    req.off('close', onClose);
  }
}
