import { Inject, Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { isUtf8 } from 'node:buffer';
import { createGunzip, Gunzip } from 'node:zlib';
import { AppError } from '@app/common/app-error';
import { APP_CONFIG, AppConfig } from '@app/config/config';
import { batchTooLarge } from './ingest-errors';

export interface IngestBody {
  /** The parsed JSON document. */
  value: unknown;
  /** Decoded (decompressed) size in bytes. */
  bytes: number;
}

type Encoding = 'identity' | 'gzip';

// gzip adds a few bytes per 16 KiB block to data that does not compress, so an honest gzip
// body can be slightly larger than its decoded size.
const GZIP_SLACK_BYTES = 64 * 1024;

// Bodies in flight drain within a few hundred milliseconds under load.
const OVERLOAD_RETRY_AFTER_SECONDS = 1;

function hasBom(b: Buffer): boolean {
  return b.length >= 3 && b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf;
}

function mediaTypeOk(header: string | undefined): boolean {
  if (!header) return false;
  const [type, ...params] = header.split(';');
  if (type.trim().toLowerCase() !== 'application/json') return false;
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

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  /** Decoded body bytes held right now (reported by /metrics). */
  get inFlightBytes(): number {
    return this.inFlight;
  }

  /**
   * Counts a request's decoded bytes against INGEST_MAX_INFLIGHT_BYTES until its response is
   * over. Parsed events take several times their JSON size in memory, so this bounds the memory
   * that a burst of large batches can take; past the budget, new bodies get 503 and Retry-After.
   * Returns `take(bytes)`, false once the budget is exceeded.
   */
  private account(req: Request): (bytes: number) => boolean {
    const res = req.res;
    // Already over (the client left during the guards): nothing would give the bytes back, and
    // the read fails anyway.
    if (!res || res.closed) return () => true;
    let held = 0;
    res.once('close', () => {
      this.inFlight -= held;
      held = 0;
    });
    return (bytes) => {
      held += bytes;
      this.inFlight += bytes;
      return this.inFlight <= this.config.ingestMaxInflightBytes;
    };
  }

  async read(req: Request): Promise<IngestBody> {
    if (!mediaTypeOk(req.headers['content-type'])) {
      throw new AppError(
        'unsupported_media_type',
        'Send the batch as Content-Type: application/json (UTF-8).',
      );
    }
    const encoding = encodingOf(req.headers['content-encoding']);
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
    const buffer = await this.collect(req, encoding, limit, rawLimit, this.account(req));
    if (!isUtf8(buffer)) throw new AppError('invalid_json', 'The body is not valid UTF-8.');
    // A byte order mark is tolerated, as JSON parsers commonly do.
    const text = buffer.toString('utf8', hasBom(buffer) ? 3 : 0);
    try {
      return { value: JSON.parse(text), bytes: buffer.length };
    } catch (err) {
      throw new AppError('invalid_json', `The body is not valid JSON: ${(err as Error).message}`);
    }
  }

  private collect(
    req: Request,
    encoding: Encoding,
    limit: number,
    rawLimit: number,
    take: (bytes: number) => boolean,
  ): Promise<Buffer> {
    return new Promise<Buffer>((resolve, reject) => {
      const chunks: Buffer[] = [];
      let decoded = 0;
      let raw = 0;
      let settled = false;
      const gunzip: Gunzip | null = encoding === 'gzip' ? createGunzip() : null;

      const cleanup = () => {
        req.off('data', onRaw);
        req.off('end', onRawEnd);
        req.off('error', onAbort);
        req.off('close', onClose);
        if (gunzip) {
          req.unpipe(gunzip);
          gunzip.destroy();
        }
      };
      const fail = (err: AppError) => {
        if (settled) return;
        settled = true;
        cleanup();
        chunks.length = 0;
        // Let the rest of the upload drain unread; nothing more is buffered.
        req.resume();
        reject(err);
      };
      const tooLarge = (bytes: number) =>
        fail(
          batchTooLarge(
            this.config,
            { events: null, bytes },
            `The decoded body exceeds ${limit} bytes; reading stopped.`,
            { Connection: 'close' },
          ),
        );
      const onDecoded = (chunk: Buffer) => {
        if (settled) return;
        decoded += chunk.length;
        if (decoded > limit) return tooLarge(decoded);
        if (!take(chunk.length)) {
          return fail(
            new AppError(
              'service_unavailable',
              'The server holds as many ingest bodies as it may at once; nothing was stored. Retry after Retry-After.',
              { headers: { 'Retry-After': String(OVERLOAD_RETRY_AFTER_SECONDS) } },
            ),
          );
        }
        chunks.push(chunk);
      };
      const onDone = () => {
        if (settled) return;
        settled = true;
        cleanup();
        resolve(Buffer.concat(chunks, decoded));
      };
      const onRaw = (chunk: Buffer) => {
        raw += chunk.length;
        if (raw > rawLimit) return tooLarge(encoding === 'gzip' ? Math.max(decoded, limit + 1) : raw);
        if (!gunzip) onDecoded(chunk);
      };
      const onRawEnd = () => {
        if (!gunzip) onDone();
      };
      const onAbort = () => fail(new AppError('invalid_body', 'The request body ended early.'));
      const onClose = () => {
        if (!req.complete) onAbort();
      };

      req.on('data', onRaw);
      req.on('end', onRawEnd);
      req.on('error', onAbort);
      req.on('close', onClose);
      if (gunzip) {
        gunzip.on('data', onDecoded);
        gunzip.on('end', onDone);
        gunzip.on('error', () =>
          fail(new AppError('invalid_body', 'The gzip body is corrupt or truncated.')),
        );
        req.pipe(gunzip);
      }
    });
  }
}
