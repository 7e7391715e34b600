import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable, Optional } from '@nestjs/common';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { normaliseAppId } from '@app/common/ids';
import { invalidQuery } from '@app/common/query-validation.pipe';
import { parseInstant } from '@app/common/reads/time-params';
import { parseEventId } from '@app/common/event-ids';
import { CursorSecretRepository } from '@app/common/reads/cursor-secret.repository';
import { isTransientDatabaseError } from '@app/database/transient-error';
import { WritePressure } from '@app/database/write-pressure';
import { ExportPosition, ExportRepository, ExportWindow } from './export.repository';
import { finishCopy, type FinishedChunk } from './ndjson-lines';
import { ExportUserKeys } from './export-user-keys';
import { copyExtent } from './copy-rows';
import { ChunkBuffers } from './chunk-buffers';
import type { ExportFormat, ExportQueryDto } from './export-query.dto';
import { ExportSlots } from './export-slots';
import { collectYoungGarbage } from '@app/common/collect-garbage';

/**
 * While this instance's ingest writes, an export waits this many times as long as its last chunk
 * read took before it reads the next: it then holds at most a fifth of the time it would take
 * of the database, and ingest, which must never wait behind a bulk read, keeps the rest.
 */
const YIELD_FACTOR = 4;
/** Ingest counts as writing when it started a statement this recently. */
const INGEST_RECENT_MS = 250;
/** The longest single wait: an export always moves on. */
const MAX_YIELD_MS = 2_000;
/**
 * The COPY bytes one chunk may hold (its complete rows, at least one), besides EXPORT_CHUNK_ROWS:
 * 5,000 events of 29 KB would be 145 MB of COPY data, and as much again of lines. 3 MiB holds the
 * 5,000 rows of ordinary events (a few hundred bytes each) and about 100 rows of the largest ones,
 * so the two formats hold a few megabytes per chunk whatever the events. 4 MiB put the Parquet
 * export's peak at the 64 MB bound in some runs (64–67 MB over idle); 3 MiB gave 50–61 MB.
 */
export const EXPORT_CHUNK_BYTES = 3 * 1_048_576;
/** The longest single pause of an export whose key is past its read budget (it then rechecks). */
const MAX_BUDGET_PAUSE_MS = 1_000;

/**
 * What an export spends of its key's read budget (READ_TIME_MS_PER_SECOND): each chunk's read
 * and the work to write it are charged as they happen, and the export pauses while the key is
 * past its budget, so that it runs at the key's share instead of being cut.
 */
export interface ExportBudget {
  charge(ms: number): void;
  /** How long until the key has read time again; null while it has some. */
  overdrawnMs(): number | null;
}

/** A checked export request: what to read, from where, in which format. */
export interface ExportPlan {
  window: ExportWindow;
  after: ExportPosition | null;
  format: ExportFormat;
  /** The key of the app's opaque record ids (the cursor key). */
  secret: Buffer;
  /** The key of the records' userKeys (common/user-keys.ts). */
  userKeySecret: Buffer;
}

/** One chunk of rows as their binary COPY (./copy-rows.ts). */
export interface CopyChunk {
  copy: Buffer;
  rows: number;
  last: ExportPosition | null;
  /**
   * Hands the buffer back for a later chunk: call once nothing reads `copy` any more. `moved` is
   * its memory when `copy`'s ArrayBuffer was transferred to a worker and has come back.
   */
  release: (moved?: ArrayBuffer) => void;
  /** `copy`'s ArrayBuffer is the chunk's alone, so it may be transferred to a worker. */
  movable?: boolean;
}

export interface ChunkOptions {
  /** Retry a chunk that failed for a transient reason (the CLI's own resume), this many times. */
  retries?: number;
  /** Called before each retry with the error and the attempt number. */
  onRetry?: (err: unknown, attempt: number) => void;
  /** The key's read budget (none in the CLI). */
  budget?: ExportBudget;
}

/** What a chunk's statement asks for: how many rows, and whether it weighs them (ExportRepository). */
export interface ChunkAsk {
  limit: number;
  weigh: boolean;
}

/**
 * What the next chunk asks for, from what the last one gave (`rows` rows in `bytes` of COPY, for
 * `ask`): twice the last ask, but no more rows of the last chunk's average size than fit in
 * `maxBytes`, and at most `most`. Only the first chunk is weighed in the statement (nothing is
 * known of the rows' size then); after it, the ask is sized here, which costs PostgreSQL nothing
 * per row. Rows read past the byte bound are dropped (copyChunk), so a chunk whose events grow
 * larger than the last one's costs a few rows of reading, never memory.
 */
export function nextAsk(
  rows: number,
  bytes: number,
  ask: ChunkAsk,
  most: number,
  maxBytes: number,
): ChunkAsk {
  const fit = Math.floor(maxBytes / Math.max(1, bytes / Math.max(1, rows)));
  return { limit: Math.max(1, Math.min(most, 2 * ask.limit, fit)), weigh: false };
}

/** The resume position `after=<receivedAt>:<id>` names, or null when it is malformed. */
export function parseAfter(secret: Buffer, appId: string, text: string): ExportPosition | null {
  const colon = text.indexOf(':');
  if (colon < 1) return null;
  const receivedMs = parseInstant(text.slice(0, colon));
  const id = parseEventId(secret, appId, text.slice(colon + 1));
  if (receivedMs === null || id === null || !/^\d+$/.test(text.slice(0, colon))) return null;
  return { receivedUs: BigInt(receivedMs) * 1000n, id };
}

/** An instant parameter (checked again here for callers without the DTO, such as the CLI). */
function instant(field: 'from' | 'to', value: string): number {
  const ms = parseInstant(value);
  if (ms === null) {
    throw invalidQuery([
      { field, code: 'invalid_timestamp', message: `${field} must be epoch ms or ISO-8601 with an offset` },
    ]);
  }
  return ms;
}

/** The rules of the raw export (docs/reads.md, "Export to a warehouse"). */
@Injectable()
export class ExportService {
  private readonly slots: ExportSlots;

  constructor(
    @Inject(APP_CONFIG)
    private readonly config: ConfigSlice<'exportChunkRows' | 'exportMaxConcurrent' | 'exportSettleMs'>,
    private readonly repository: ExportRepository,
    private readonly secrets: CursorSecretRepository,
    // Absent in the CLI, whose process ingests nothing.
    @Optional() private readonly pressure?: WritePressure,
  ) {
    this.slots = new ExportSlots(config.exportMaxConcurrent);
  }

  /** The latest end a window may have now: ingest commits every event within EXPORT_SETTLE_MS. */
  horizon(now = Date.now()): number {
    return now - this.config.exportSettleMs;
  }

  /** Checks a request against the horizon and parses its resume point; throws 400. */
  async plan(query: ExportQueryDto, now = Date.now()): Promise<ExportPlan> {
    const appId = normaliseAppId(query.appId);
    const horizon = this.horizon(now);
    const fromMs = instant('from', query.from);
    const toMs = query.to === undefined ? horizon : instant('to', query.to);
    if (toMs > horizon) {
      throw invalidQuery([
        {
          field: 'to',
          code: 'out_of_range',
          message: `to must not be later than the export horizon, now − ${this.config.exportSettleMs} ms (${new Date(horizon).toISOString()}); events received since may still be committing`,
        },
      ]);
    }
    if (fromMs > toMs) {
      throw invalidQuery([{ field: 'from', code: 'invalid_range', message: 'from must not be after to' }]);
    }
    const secret = await this.secrets.cursorSecret();
    let after: ExportPosition | null = null;
    if (query.after !== undefined) {
      after = parseAfter(secret, appId, query.after);
      if (!after) {
        throw invalidQuery([
          { field: 'after', code: 'invalid_format', message: 'after must be <receivedAt>:<id> of a record' },
        ]);
      }
    }
    const window = { appId, fromMs, toMs, testMode: query.testMode ?? 'false' } as const;
    const userKeySecret = await this.secrets.userKeySecret();
    return { window, after, format: query.format ?? 'ndjson', secret, userKeySecret };
  }

  /** Takes the export slot of `holder` (429 when it has one, or the instance is full). */
  acquire(holder: string): () => void {
    return this.slots.take(holder);
  }

  /**
   * The window's rows in order, one chunk (one statement) at a time, as the binary COPY of their
   * columns (./copy-rows.ts) in a buffer of the export's own: release each chunk once nothing
   * reads it, and the buffer is reused. The next chunk is read while the caller handles the
   * current one, so at most two chunks are read ahead; the caller pulls, so a slow consumer
   * slows the reads down rather than piling rows up.
   */
  copyChunks(plan: ExportPlan, options: ChunkOptions = {}): AsyncGenerator<CopyChunk> {
    const { window } = plan;
    const buffers = new ChunkBuffers();
    return this.paged(
      plan.after,
      async (after, ask) => {
        const copy = await this.copyChunk(window, after, ask, buffers);
        const release = (moved?: ArrayBuffer) => (moved ? buffers.adopt(moved) : buffers.give(copy));
        return { copy, ...copyExtent(copy), release, movable: true };
      },
      (chunk) => ({ ...chunk, bytes: chunk.copy.length }),
      options,
    );
  }

  /**
   * The same rows as NDJSON lines written from their binary COPY (./ndjson-lines.ts): a few
   * milliseconds per chunk, done before the next chunk is asked for. The chunks' buffers are the
   * export's own, reused: release each chunk once it is sent.
   */
  ndjsonChunks(plan: ExportPlan, options: ChunkOptions = {}): AsyncGenerator<FinishedChunk> {
    const { window, secret } = plan;
    const buffers = new ChunkBuffers();
    const userKeys = new ExportUserKeys(plan.userKeySecret, window.appId);
    return this.paged(
      plan.after,
      async (after, ask) => {
        const copy = await this.copyChunk(window, after, ask, buffers);
        try {
          return finishCopy(secret, window.appId, copy, userKeys, buffers);
        } finally {
          buffers.give(copy);
        }
      },
      (chunk) => ({ ...chunk, bytes: chunk.copyBytes }),
      options,
    );
  }

  /**
   * The chunks from `after` on, the next one read while the caller handles the current one. A
   * chunk may end early at its byte bound, so only an empty chunk, or a short one that a byte
   * bound cannot explain, ends the window.
   */
  private copyChunk(
    window: ExportWindow,
    after: ExportPosition | null,
    { limit, weigh }: ChunkAsk,
    buffers: ChunkBuffers,
  ): Promise<Buffer> {
    return this.repository.copyChunk(window, after, limit, buffers, EXPORT_CHUNK_BYTES, weigh);
  }

  private async *paged<T>(
    after: ExportPosition | null,
    read: (after: ExportPosition | null, ask: ChunkAsk) => Promise<T | null>,
    extent: (chunk: T) => { rows: number; bytes: number; last: ExportPosition | null },
    options: ChunkOptions,
  ): AsyncGenerator<T> {
    const most = this.config.exportChunkRows;
    const paced = this.pacedRead(read, options.budget);
    // The first chunk weighs its rows: nothing is known of their size yet.
    let ask: ChunkAsk = { limit: most, weigh: true };
    let next = this.retrying(() => paced(after, ask), options);
    for (;;) {
      const chunk = await next;
      if (chunk === null) return;
      const { rows, bytes, last } = extent(chunk);
      if (rows === 0) return;
      if (!last) {
        yield chunk;
        return;
      }
      const asked = (ask = nextAsk(rows, bytes, ask, most, EXPORT_CHUNK_BYTES));
      next = this.retrying(() => paced(last, asked), options);
      // A read that fails while the consumer is busy is reported when the consumer asks for it.
      next.catch(() => undefined);
      yield chunk;
    }
  }

  /**
   * `read`, after the waits that keep an export from crowding others out: behind this instance's
   * ingest while it writes, and while the key is past its read budget; each read is then charged
   * to the budget.
   */
  private pacedRead<T>(
    read: (after: ExportPosition | null, ask: ChunkAsk) => Promise<T | null>,
    budget: ExportBudget | undefined,
  ): (from: ExportPosition | null, ask: ChunkAsk) => Promise<T | null> {
    let lastReadMs = 0;
    return async (from, ask) => {
      if (lastReadMs > 0 && this.pressure?.busy(INGEST_RECENT_MS)) {
        await sleep(Math.min(lastReadMs * YIELD_FACTOR, MAX_YIELD_MS));
      }
      for (let wait = budget?.overdrawnMs(); wait; wait = budget?.overdrawnMs()) {
        await sleep(Math.min(Math.ceil(wait), MAX_BUDGET_PAUSE_MS));
      }
      const started = performance.now();
      const chunk = await read(from, ask);
      // The socket's buffers of the chunk, now copied out, are garbage (common/collect-garbage.ts).
      collectYoungGarbage();
      lastReadMs = performance.now() - started;
      budget?.charge(lastReadMs);
      return chunk;
    };
  }

  private async retrying<T>(read: () => Promise<T>, { retries = 0, onRetry }: ChunkOptions): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await read();
      } catch (err) {
        if (attempt > retries || !isTransientDatabaseError(err)) throw err;
        onRetry?.(err, attempt);
        await sleep(Math.min(30_000, 500 * 2 ** (attempt - 1)));
      }
    }
  }
}
