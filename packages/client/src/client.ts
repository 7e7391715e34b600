import { gzip, utf8Length } from './encoding.js';
import { TallyError } from './errors.js';
import type { Segment, Spool } from './spool.js';
import type { IngestResult, TallyEvent } from './types.js';
import { uuidv7 } from './uuid.js';

/** What happened to one batch: the server's answer, or the error that ended it. */
export interface BatchResult {
  /** The eventIds of the batch, in the order sent. */
  eventIds: string[];
  /** HTTP status of the final answer; 0 when the client gave up or refused without one. */
  status: number;
  /** The 200 answer, with per-event `errors` and `warnings`. */
  result?: IngestResult;
  /** Why the batch (or the event) was not delivered: every event of it counts as rejected. */
  error?: TallyError;
  /** Requests made for these events (the last one included). */
  attempts: number;
}

export interface TallyStats {
  /** Tracked, not yet sent. */
  queued: number;
  /** In a request that has not been answered yet (retries included). */
  inFlight: number;
  accepted: number;
  duplicates: number;
  rejected: number;
  /** Removed from a full queue (the oldest first), never sent. */
  dropped: number;
  /** Requests that were retries. */
  retries: number;
  /** Requests made. */
  batches: number;
}

export interface TallyClientOptions {
  /** Base URL of the deployment, e.g. `https://tally.example.com`. */
  endpoint: string;
  /** An ingest key, `tly_live_…` or `tly_test_…`. */
  ingestKey: string;
  /** Events per request. Default 500; the server's limit (1000 by default) wins when lower. */
  flushAt?: number;
  /** Longest time an event waits in the queue before a request is sent. Default 1000 ms. */
  flushIntervalMs?: number;
  /** Largest request body before gzip, in bytes. Default 900 000 (the server takes 1 MiB by default). */
  maxBatchBytes?: number;
  /** Queue bound in events; past it the oldest queued events are dropped. Default 100 000. */
  maxQueueEvents?: number;
  /** Queue bound in bytes of JSON; past it the oldest queued events are dropped. Default 64 MiB. */
  maxQueueBytes?: number;
  /** Requests in flight at once. Default 2. */
  concurrency?: number;
  /** Bodies larger than this are sent gzipped. Default 4096 bytes; Infinity never gzips. */
  gzipAboveBytes?: number;
  /** Time for one request, answer included. Default 15 000 ms. */
  requestTimeoutMs?: number;
  /** Time after the first attempt of a batch beyond which no retry starts. Default 300 000 ms. */
  maxRetryElapsedMs?: number;
  /** Requests that may carry one event, the first included. Default 20. */
  maxAttempts?: number;
  /** First backoff step (full jitter, doubled per retry). Default 250 ms. */
  backoffBaseMs?: number;
  /** Largest backoff step. Default 30 000 ms. */
  backoffMaxMs?: number;
  /** Directory of the durable queue (Node only). Required by trackDurable(). */
  spoolDir?: string;
  /** Events per spool segment file. Default 1000. */
  spoolSegmentEvents?: number;
  /** On SIGTERM: shutdown() within `shutdownTimeoutMs`, then let the signal end the process. Default false. */
  handleSignals?: boolean;
  /** Timeout used by handleSignals. Default 10 000 ms. */
  shutdownTimeoutMs?: number;
  /** Every batch's outcome, with per-event errors and warnings. */
  onResult?: (result: BatchResult) => void;
  /** Every failure: rejected batches, dropped events, spool errors. Default: console.error. */
  onError?: (err: TallyError) => void;
  /** The fetch to use. Default: the global fetch. */
  fetch?: typeof fetch;
  /** Clock, for tests. Default Date.now. */
  now?: () => number;
  /** Sleep, for tests. Default a timer. */
  sleep?: (ms: number) => Promise<void>;
  /** Random in [0, 1), for the jitter. Default Math.random. */
  random?: () => number;
}

export interface ShutdownReport {
  /** True when everything tracked was answered in time. */
  flushed: boolean;
  /** Events neither answered nor dropped (they stay in the spool when they were durable). */
  unsent: number;
}

interface Entry {
  id: string;
  json: string;
  bytes: number;
  attempts: number;
  seq: number;
  segment?: Segment;
}

interface FlushWaiter {
  through: number;
  remaining: number;
  resolve(): void;
}

const EVENT_OVERHEAD = 1; // the comma between events
const BODY_OVERHEAD = 48; // {"sentAt":…,"events":[]}

const defaultSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Batches events, sends them gzipped, retries with the same eventIds (so a retry after a lost
 * answer is a duplicate, never a second copy), splits on 413, and keeps an optional durable queue.
 */
export class TallyClient {
  private readonly url: string;
  private readonly o: Required<
    Omit<TallyClientOptions, 'spoolDir' | 'onResult' | 'fetch' | 'endpoint' | 'ingestKey'>
  > &
    Pick<TallyClientOptions, 'spoolDir' | 'onResult'>;
  private readonly fetchImpl: typeof fetch;
  private queue: Entry[] = [];
  private head = 0;
  private queueBytes = 0;
  private inFlightEvents = 0;
  private inFlightRequests = 0;
  private seq = 0;
  private waiters: FlushWaiter[] = [];
  private timer: ReturnType<typeof setTimeout> | undefined;
  private flushing = 0;
  private pumpScheduled = false;
  private closed = false;
  private pausedUntil = 0;
  /** Limits learned from a 413. */
  private limitEvents = Infinity;
  private limitBytes = Infinity;
  private spool: Promise<Spool> | undefined;
  private signalHandler: (() => void) | undefined;
  private readonly counters = { accepted: 0, duplicates: 0, rejected: 0, dropped: 0, retries: 0, batches: 0 };

  constructor(options: TallyClientOptions) {
    if (!options.endpoint) throw new TypeError('TallyClient: endpoint is required');
    if (!options.ingestKey) throw new TypeError('TallyClient: ingestKey is required');
    this.url = options.endpoint.replace(/\/+$/, '') + '/api/ingest';
    this.fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.o = {
      flushAt: 500,
      flushIntervalMs: 1000,
      maxBatchBytes: 900_000,
      maxQueueEvents: 100_000,
      maxQueueBytes: 64 * 1024 * 1024,
      concurrency: 2,
      gzipAboveBytes: 4096,
      requestTimeoutMs: 15_000,
      maxRetryElapsedMs: 300_000,
      maxAttempts: 20,
      backoffBaseMs: 250,
      backoffMaxMs: 30_000,
      spoolSegmentEvents: 1000,
      handleSignals: false,
      shutdownTimeoutMs: 10_000,
      onError: (err) => console.error(`[tally] ${err.message}`),
      now: Date.now,
      sleep: defaultSleep,
      random: Math.random,
      ...stripUndefined(options),
    };
    this.authorization = `Bearer ${options.ingestKey}`;
    if (this.o.spoolDir) this.spool = this.openSpool(this.o.spoolDir);
    if (this.o.handleSignals && typeof process !== 'undefined' && process.once) {
      this.signalHandler = () => {
        void this.shutdown({ timeoutMs: this.o.shutdownTimeoutMs }).finally(() =>
          process.kill(process.pid, 'SIGTERM'),
        );
      };
      process.once('SIGTERM', this.signalHandler);
    }
  }

  private readonly authorization: string;

  /**
   * Queues an event and returns its eventId (the caller's, or a new UUIDv7). `eventTime` is the
   * time of the call unless set. Throws once shutdown() has been called.
   */
  track(event: TallyEvent): string {
    const entry = this.entryFor(event);
    this.enqueue(entry);
    return entry.id;
  }

  /** Like track(), and resolves once the event is fsynced to `spoolDir`. */
  async trackDurable(event: TallyEvent): Promise<string> {
    if (!this.spool) throw new TypeError('TallyClient: trackDurable() needs the spoolDir option');
    const entry = this.entryFor(event);
    const spool = await this.spool;
    const { segment, durable } = spool.append(entry.json);
    entry.segment = segment;
    this.enqueue(entry);
    await durable;
    return entry.id;
  }

  private entryFor(event: TallyEvent): Entry {
    if (this.closed) {
      throw new TallyError({ status: 0, code: 'client_closed', detail: 'track() after shutdown()' });
    }
    let id = event.eventId;
    let json: string;
    let bytes: number;
    if (id === undefined && event.eventTime === undefined) {
      const now = this.o.now();
      id = uuidv7(now);
      const rest = JSON.stringify(event);
      const head = `{"eventId":"${id}","eventTime":${now}${rest.length > 2 ? ',' : ''}`;
      json = head + rest.slice(1);
      // The head is ASCII: sizing the parts apart leaves the joined string to be flattened once,
      // when the batch body is built.
      bytes = head.length + utf8Length(rest) - 1;
    } else {
      id ??= uuidv7(this.o.now());
      json = JSON.stringify({ ...event, eventId: id, eventTime: event.eventTime ?? this.o.now() });
      bytes = utf8Length(json);
    }
    return { id, json, bytes, attempts: 0, seq: ++this.seq };
  }

  private enqueue(entry: Entry): void {
    this.queue.push(entry);
    this.queueBytes += entry.bytes;
    while (
      this.queue.length - this.head > this.o.maxQueueEvents ||
      (this.queueBytes > this.o.maxQueueBytes && this.queue.length - this.head > 1)
    ) {
      const old = this.queue[this.head++];
      this.queueBytes -= old.bytes;
      this.counters.dropped++;
      this.settled(old);
      this.o.onError(
        new TallyError({ status: 0, code: 'queue_full', detail: `Queue full: event ${old.id} dropped` }),
      );
    }
    this.schedulePump();
  }

  /**
   * Batches are taken and sent at the end of the current turn, not inside track(): a caller that
   * tracks in a loop pays for its events only, and the batch is the same, since no request can
   * progress before the loop yields anyway.
   */
  private schedulePump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    queueMicrotask(this.scheduledPump);
  }

  private readonly scheduledPump = (): void => {
    this.pumpScheduled = false;
    this.pump();
  };

  /** Resolves when every event tracked so far has been answered (stored, duplicate or rejected). */
  async flush(): Promise<void> {
    // Events recovered from the spool count as tracked before any call.
    if (this.spool) await this.spool;
    const remaining = this.queue.length - this.head + this.inFlightEvents;
    if (remaining === 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      this.waiters.push({ through: this.seq, remaining, resolve });
      this.flushing++;
      this.pump();
    }).then(() => {
      this.flushing--;
    });
  }

  /** Flushes within `timeoutMs`, then stops timers. Later track() calls throw. */
  async shutdown(options: { timeoutMs?: number } = {}): Promise<ShutdownReport> {
    const timeoutMs = options.timeoutMs ?? this.o.shutdownTimeoutMs;
    this.closed = true;
    if (this.signalHandler) process.removeListener('SIGTERM', this.signalHandler);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const flushed = await Promise.race([
      this.flush().then(() => true),
      new Promise<boolean>((r) => {
        timer = setTimeout(() => r(false), timeoutMs);
        unref(timer);
      }),
    ]);
    clearTimeout(timer);
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const unsent = this.queue.length - this.head + this.inFlightEvents;
    if (this.spool) await (await this.spool).close();
    if (!flushed) {
      this.o.onError(
        new TallyError({
          status: 0,
          code: 'shutdown_timeout',
          detail: `${unsent} events were not answered within ${timeoutMs} ms${this.spool ? '; durable ones stay in the spool' : ''}`,
        }),
      );
    }
    return { flushed, unsent };
  }

  stats(): TallyStats {
    return {
      queued: this.queue.length - this.head,
      inFlight: this.inFlightEvents,
      ...this.counters,
    };
  }

  private async openSpool(dir: string): Promise<Spool> {
    const { Spool } = await import('./spool.js');
    const spool = new Spool(dir, this.o.spoolSegmentEvents, (err) =>
      this.o.onError(new TallyError({ status: 0, code: 'spool_error', detail: String(err), cause: err })),
    );
    for (const { segment, records } of await spool.recover()) {
      for (const json of records) {
        let id: string;
        try {
          id = String((JSON.parse(json) as { eventId?: unknown }).eventId);
        } catch {
          continue;
        }
        this.enqueue({ id, json, bytes: utf8Length(json), attempts: 0, seq: ++this.seq, segment });
      }
    }
    return spool;
  }

  // ---- sending ----

  private pump(): void {
    while (this.inFlightRequests < this.o.concurrency) {
      const queued = this.queue.length - this.head;
      if (queued === 0) break;
      const full = queued >= Math.min(this.o.flushAt, this.limitEvents);
      if (!full && this.flushing === 0 && !this.closed) {
        this.timer ??= setTimeout(() => {
          this.timer = undefined;
          this.flushing++;
          this.pump();
          this.flushing--;
        }, this.o.flushIntervalMs);
        unref(this.timer);
        break;
      }
      const batch = this.takeBatch();
      if (batch.length) void this.send(batch);
    }
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
  }

  /** The next batch within the event and byte limits; rejects events too large to ever send. */
  private takeBatch(): Entry[] {
    const maxEvents = Math.min(this.o.flushAt, this.limitEvents);
    const maxBytes = Math.min(this.o.maxBatchBytes, this.limitBytes);
    const batch: Entry[] = [];
    let bytes = BODY_OVERHEAD;
    while (this.head < this.queue.length && batch.length < maxEvents) {
      const e = this.queue[this.head];
      if (BODY_OVERHEAD + e.bytes > maxBytes) {
        this.head++;
        this.queueBytes -= e.bytes;
        this.rejectOversized(e, maxBytes);
        continue;
      }
      if (bytes + e.bytes + EVENT_OVERHEAD > maxBytes) break;
      this.head++;
      this.queueBytes -= e.bytes;
      bytes += e.bytes + EVENT_OVERHEAD;
      batch.push(e);
    }
    this.inFlightEvents += batch.length;
    return batch;
  }

  private rejectOversized(e: Entry, maxBytes: number): void {
    const error = new TallyError({
      status: 0,
      code: 'event_too_large',
      detail: `Event ${e.id} is ${e.bytes} bytes; a request may carry at most ${maxBytes}. Not sent.`,
    });
    this.counters.rejected++;
    this.o.onError(error);
    this.o.onResult?.({ eventIds: [e.id], status: 0, error, attempts: e.attempts });
    this.settled(e);
  }

  private async send(batch: Entry[]): Promise<void> {
    this.inFlightRequests++;
    try {
      await this.deliver(batch);
    } catch (err) {
      // A bug in the client itself: never leave flush() waiting.
      this.finish(batch, 0, undefined, toTallyError(err));
    } finally {
      this.inFlightRequests--;
      this.pump();
    }
  }

  private async deliver(batch: Entry[]): Promise<void> {
    const started = this.o.now();
    const events = batch.map((e) => e.json).join(',');
    for (let retry = 0; ; retry++) {
      const wait = this.pausedUntil - this.o.now();
      if (wait > 0) await this.o.sleep(wait);
      for (const e of batch) e.attempts++;
      this.counters.batches++;
      if (retry > 0) this.counters.retries++;
      const body = `{"sentAt":${this.o.now()},"events":[${events}]}`;
      let error: TallyError;
      let res: Response | undefined;
      try {
        res = await this.post(body);
      } catch (err) {
        error = toTallyError(err);
      }
      if (res) {
        if (res.status === 200) {
          let result: IngestResult;
          try {
            result = (await res.json()) as IngestResult;
          } catch (err) {
            // The answer was lost on the way: retry; a stored batch comes back as duplicates.
            error = new TallyError({ status: 0, code: 'network_error', detail: String(err), cause: err });
            result = undefined as never;
          }
          if (result) return this.finish(batch, 200, result);
        } else {
          error = await TallyError.fromResponse(res, this.o.now());
          if (res.status === 413) return this.split(batch, error);
        }
      }
      error = error!;
      const status = error.status;
      const retryable =
        status === 0 ||
        status === 408 ||
        status === 429 ||
        (status >= 500 && status !== 501 && status !== 505);
      if (!retryable) {
        this.o.onError(error);
        return this.finish(batch, status, undefined, error);
      }
      let delay: number;
      if ((status === 429 || status === 503) && error.retryAfterMs !== null) {
        delay = error.retryAfterMs;
        this.pausedUntil = Math.max(this.pausedUntil, this.o.now() + delay);
      } else {
        delay = this.backoff(retry);
      }
      const attempts = Math.max(...batch.map((e) => e.attempts));
      if (attempts >= this.o.maxAttempts || this.o.now() + delay - started > this.o.maxRetryElapsedMs) {
        const exhausted = new TallyError({
          status: 0,
          code: 'retries_exhausted',
          detail: `Gave up after ${attempts} attempts: ${error.message}`,
          requestId: error.requestId,
          cause: error,
        });
        this.o.onError(exhausted);
        return this.finish(batch, status, undefined, exhausted);
      }
      await this.o.sleep(delay);
    }
  }

  /** Exponential backoff with full jitter: random in [0, min(max, base · 2^retry)). */
  private backoff(retry: number): number {
    const cap = Math.min(this.o.backoffMaxMs, this.o.backoffBaseMs * 2 ** Math.min(retry, 30));
    return Math.floor(this.o.random() * cap);
  }

  private async post(body: string): Promise<Response> {
    const headers: Record<string, string> = {
      authorization: this.authorization,
      'content-type': 'application/json',
    };
    let payload: string | Uint8Array = body;
    // UTF-8 takes at most 3 bytes per UTF-16 unit: most bodies are sized without a scan.
    const over =
      body.length > this.o.gzipAboveBytes ||
      (body.length * 3 > this.o.gzipAboveBytes && utf8Length(body) > this.o.gzipAboveBytes);
    if (over) {
      payload = await gzip(body);
      headers['content-encoding'] = 'gzip';
    }
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.o.requestTimeoutMs);
    unref(timer);
    try {
      const res = await this.fetchImpl(this.url, {
        method: 'POST',
        headers,
        body: payload as BodyInit,
        signal: controller.signal,
      });
      if (res.status !== 200) return res;
      // Read the body within the timeout too.
      const text = await res.text();
      return new Response(text, { status: 200, headers: res.headers });
    } catch (err) {
      if (controller.signal.aborted) {
        throw new TallyError({
          status: 0,
          code: 'timeout',
          detail: `No answer within ${this.o.requestTimeoutMs} ms`,
          cause: err,
        });
      }
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  /** 413: split by the limits the server stated, and queue the parts first. */
  private split(batch: Entry[], error: TallyError): void {
    const body = error.body ?? {};
    const limitEvents =
      typeof body.limitEvents === 'number' && body.limitEvents >= 1 ? body.limitEvents : null;
    const limitBytes = typeof body.limitBytes === 'number' && body.limitBytes >= 1 ? body.limitBytes : null;
    if (limitEvents !== null) this.limitEvents = limitEvents;
    if (limitBytes !== null) this.limitBytes = limitBytes;
    // The body size is measured before gzip on the server side too.
    const totalBytes = BODY_OVERHEAD + batch.reduce((n, e) => n + e.bytes + EVENT_OVERHEAD, 0);
    let parts: Entry[][];
    const fitsEvents = limitEvents === null || batch.length <= limitEvents;
    const fitsBytes = limitBytes === null || totalBytes <= limitBytes;
    if (batch.length === 1 && !fitsBytes) {
      parts = [];
    } else if (!fitsEvents || !fitsBytes) {
      parts = this.partition(batch, limitEvents ?? Infinity, limitBytes ?? Infinity);
    } else {
      // Within the stated limits by our measure, yet refused: halve.
      const half = Math.ceil(batch.length / 2);
      parts = batch.length > 1 ? [batch.slice(0, half), batch.slice(half)] : [];
    }
    if (parts.length === 0) {
      // One event that can never be accepted.
      for (const e of batch) {
        this.inFlightEvents--;
        this.rejectOversized(e, limitBytes ?? e.bytes - 1);
      }
      return;
    }
    // Events out of attempts end here; the parts go back to the front of the queue.
    const spent = batch.filter((e) => e.attempts >= this.o.maxAttempts);
    if (spent.length) {
      const exhausted = new TallyError({
        status: 413,
        code: 'retries_exhausted',
        detail: `Gave up after ${this.o.maxAttempts} attempts: ${error.message}`,
        requestId: error.requestId,
        cause: error,
      });
      this.o.onError(exhausted);
      this.finish(spent, 413, undefined, exhausted);
    }
    const entries = parts.flat().filter((e) => e.attempts < this.o.maxAttempts);
    this.inFlightEvents -= entries.length;
    this.queue.splice(this.head, 0, ...entries);
    for (const e of entries) this.queueBytes += e.bytes;
    this.flushing++;
    queueMicrotask(() => this.flushing--);
    this.pump();
  }

  private partition(batch: Entry[], maxEvents: number, maxBytes: number): Entry[][] {
    const parts: Entry[][] = [];
    let part: Entry[] = [];
    let bytes = BODY_OVERHEAD;
    for (const e of batch) {
      if (part.length && (part.length >= maxEvents || bytes + e.bytes + EVENT_OVERHEAD > maxBytes)) {
        parts.push(part);
        part = [];
        bytes = BODY_OVERHEAD;
      }
      part.push(e);
      bytes += e.bytes + EVENT_OVERHEAD;
    }
    if (part.length) parts.push(part);
    return parts;
  }

  private finish(batch: Entry[], status: number, result?: IngestResult, error?: TallyError): void {
    this.inFlightEvents -= batch.length;
    if (result) {
      this.counters.accepted += result.accepted;
      this.counters.duplicates += result.duplicates;
      this.counters.rejected += result.rejected;
    } else {
      this.counters.rejected += batch.length;
    }
    const attempts = batch.reduce((m, e) => Math.max(m, e.attempts), 0);
    try {
      this.o.onResult?.({ eventIds: batch.map((e) => e.id), status, result, error, attempts });
    } finally {
      for (const e of batch) this.settled(e);
    }
  }

  /** An event is answered (or dropped): its spool segment and flush() waiters learn it. */
  private settled(e: Entry): void {
    if (e.segment) void this.spool!.then((s) => s.answered(e.segment!));
    if (this.waiters.length === 0) return;
    for (const w of this.waiters) if (e.seq <= w.through) w.remaining--;
    if (this.waiters.some((w) => w.remaining <= 0)) {
      const done = this.waiters.filter((w) => w.remaining <= 0);
      this.waiters = this.waiters.filter((w) => w.remaining > 0);
      for (const w of done) w.resolve();
    }
  }
}

function toTallyError(err: unknown): TallyError {
  if (err instanceof TallyError) return err;
  return new TallyError({
    status: 0,
    code: 'network_error',
    detail:
      err instanceof Error
        ? `${err.message}${err.cause ? ` (${String((err.cause as Error).message ?? err.cause)})` : ''}`
        : String(err),
    cause: err,
  });
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function unref(t: unknown): void {
  (t as { unref?: () => void }).unref?.();
}
