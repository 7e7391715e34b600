import { Inject, Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { AppError } from '@app/common/app-error';
import {
  type BodyFormat,
  type BodyPeek,
  type JsonBody,
  parseJsonBody,
  readBodyBytes,
} from '@app/common/http/json-body';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { BatchLimits, batchTooLarge } from './ingest-errors';
import { CpuMeter } from './ingest-cpu.budget';

export type IngestBody = JsonBody;
export type { BodyFormat };

// Bodies in flight drain within a few hundred milliseconds under load.
const OVERLOAD_RETRY_AFTER_SECONDS = 1;

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
    const buffer = await this.readBytes(req, keyId, cpu, format);
    // Parsing is the first of the request's CPU work, done in the key's turn (IngestCpuBudgets).
    await cpu.beginTurn();
    return cpu.time(() => parseJsonBody(buffer));
  }

  /**
   * The body's bytes within ingest's limits, their reading charged to `cpu`; not parsed. `peek`
   * looks at the first bytes before the rest is read, and may refuse the request there.
   */
  async readBytes(
    req: Request,
    keyId: string,
    cpu: CpuMeter,
    format: BodyFormat = {},
    peek?: BodyPeek,
  ): Promise<Buffer> {
    const buffer = await readBodyBytes(
      req,
      {
        maxBytes: this.config.ingestMaxBytes,
        tooLarge: (bytes, detail) =>
          batchTooLarge(this.config, { events: null, bytes }, detail, { Connection: 'close' }),
        pace: {
          idleMs: this.config.ingestBodyIdleMs,
          minBytesPerSecond: this.config.ingestBodyMinBytesPerSecond,
        },
        budget: () => this.account(req, keyId),
        peek,
      },
      format,
    );
    cpu.chargeBody(buffer.length);
    return buffer;
  }
}
