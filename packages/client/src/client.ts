import { utf8Length } from './encoding.js';
import { TallyError } from './errors.js';
import { FlushWaiters, SendQueue, Slots, type Entry } from './queue.js';
import { decideRetry, type RetryPolicy } from './retry.js';
import { onTerminationSignals } from './signals.js';
import { planSplit } from './split.js';
import type { Spool } from './spool.js';
import { postBatch, toTallyError, unref, type TransportOptions } from './transport.js';
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
  /** In a request that has not been answered yet (retries and their backoff included). */
  inFlight: number;
  accepted: number;
  duplicates: number;
  /** Refused by the server: per-event errors of a 200, and batches answered with a final 4xx. */
  rejectedByServer: number;
  /** Not delivered on the client's own decision: retries exhausted, or an event too large to ever send. */
  gaveUp: number;
  /** @deprecated `rejectedByServer + gaveUp`; read the two apart. */
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
  /** Requests in flight at once. Default 2. A batch waiting out its backoff holds no slot. */
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
  /**
   * On SIGTERM or SIGINT: shutdown() within `shutdownTimeoutMs`, then exit with 128 + the signal's
   * number, unless the application has listeners of its own for that signal. Default false.
   */
  handleSignals?: boolean;
  /** Timeout used by handleSignals, and the default of shutdown(). Default 10 000 ms. */
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

type Settings = Required<
  Omit<TallyClientOptions, 'spoolDir' | 'onResult' | 'fetch' | 'endpoint' | 'ingestKey'>
> &
  Pick<TallyClientOptions, 'spoolDir' | 'onResult'>;

const defaultSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function settingsOf(options: TallyClientOptions): Settings {
  return {
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
}

/**
 * Batches events, sends them gzipped, retries with the same eventIds (so a retry after a lost
 * answer is a duplicate, never a second copy), splits on 413, and keeps an optional durable queue.
 * The parts: SendQueue and Slots (queue.ts), decideRetry (retry.ts), planSplit (split.ts),
 * postBatch (transport.ts), Spool (spool.ts) and onTerminationSignals (signals.ts).
 */
export class TallyClient {
  private readonly o: Settings;
  private readonly transport: TransportOptions;
  private readonly queue: SendQueue;
  private readonly slots: Slots;
  private readonly waiters = new FlushWaiters();
  private inFlightEvents = 0;
  private seq = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private flushing = 0;
  private pumpScheduled = false;
  private closed = false;
  /** Until when the server asked every request to wait (Retry-After). */
  private pausedUntil = 0;
  /** Limits learned from a 413. */
  private limitEvents = Infinity;
  private limitBytes = Infinity;
  private spool: Promise<Spool> | undefined;
  private stopSignals: (() => void) | undefined;
  private readonly counters = {
    accepted: 0,
    duplicates: 0,
    rejectedByServer: 0,
    gaveUp: 0,
    dropped: 0,
    retries: 0,
    batches: 0,
  };

  constructor(options: TallyClientOptions) {
    if (!options.endpoint) throw new TypeError('TallyClient: endpoint is required');
    if (!options.ingestKey) throw new TypeError('TallyClient: ingestKey is required');
    this.o = settingsOf(options);
    this.transport = {
      url: options.endpoint.replace(/\/+$/, '') + '/api/ingest',
      authorization: `Bearer ${options.ingestKey}`,
      fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
      gzipAboveBytes: this.o.gzipAboveBytes,
      requestTimeoutMs: this.o.requestTimeoutMs,
      now: this.o.now,
    };
    this.queue = new SendQueue({ maxEvents: this.o.maxQueueEvents, maxBytes: this.o.maxQueueBytes });
    this.slots = new Slots(this.o.concurrency);
    if (this.o.spoolDir) {
      this.spool = this.openSpool(this.o.spoolDir);
      // Reported here; trackDurable() rejects with the same error, and nothing goes unhandled.
      this.spool.catch((err: unknown) => this.o.onError(spoolError(err)));
    }
    if (this.o.handleSignals && typeof process !== 'undefined' && typeof process.on === 'function') {
      this.stopSignals = onTerminationSignals(() => this.shutdown({ timeoutMs: this.o.shutdownTimeoutMs }));
    }
  }

  /**
   * Queues an event and returns its eventId (the caller's, or a new UUIDv7). `eventTime` is the
   * time of the call unless set. Throws once shutdown() has been called.
   */
  track(event: TallyEvent): string {
    const entry = this.entryFor(event);
    this.enqueue(entry);
    return entry.id;
  }

  /** Like track(), and resolves once the event is fsynced to `spoolDir`; rejects when it cannot be. */
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

  /** Resolves when every event tracked so far has been answered (stored, duplicate or rejected). */
  async flush(): Promise<void> {
    // Events recovered from the spool count as tracked before any call.
    if (this.spool) await this.spool.catch(() => undefined);
    const remaining = this.queue.length + this.inFlightEvents;
    if (remaining === 0) return;
    const done = this.waiters.wait(this.seq, remaining);
    this.flushing++;
    this.pump();
    await done;
    this.flushing--;
  }

  /** Flushes within `timeoutMs`, then stops timers and signal handling. Later track() calls throw. */
  async shutdown(options: { timeoutMs?: number } = {}): Promise<ShutdownReport> {
    const timeoutMs = options.timeoutMs ?? this.o.shutdownTimeoutMs;
    this.closed = true;
    this.stopSignals?.();
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
    const unsent = this.queue.length + this.inFlightEvents;
    const spool = await this.spool?.catch(() => undefined);
    await spool?.close();
    if (!flushed) {
      const rest = spool ? '; durable ones stay in the spool' : '';
      this.o.onError(
        new TallyError({
          status: 0,
          code: 'shutdown_timeout',
          detail: `${unsent} events were not answered within ${timeoutMs} ms${rest}`,
        }),
      );
    }
    return { flushed, unsent };
  }

  stats(): TallyStats {
    const c = this.counters;
    return {
      queued: this.queue.length,
      inFlight: this.inFlightEvents,
      ...c,
      rejected: c.rejectedByServer + c.gaveUp,
    };
  }

  // ---- tracking ----

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
    for (const old of this.queue.push(entry)) {
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

  private async openSpool(dir: string): Promise<Spool> {
    const { Spool } = await import('./spool.js');
    const spool = new Spool(dir, this.o.spoolSegmentEvents, (err) => this.o.onError(spoolError(err)));
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

  /** Starts batches while a request slot is free and a batch is due (full, or flushing). */
  private pump(): void {
    while (this.queue.length > 0 && this.slots.free) {
      const full = this.queue.length >= Math.min(this.o.flushAt, this.limitEvents);
      if (!full && this.flushing === 0 && !this.closed) {
        this.timer ??= setTimeout(this.flushTimer, this.o.flushIntervalMs);
        unref(this.timer);
        return;
      }
      const { batch, oversized } = this.queue.take(
        Math.min(this.o.flushAt, this.limitEvents),
        Math.min(this.o.maxBatchBytes, this.limitBytes),
      );
      for (const e of oversized) this.rejectOversized(e, Math.min(this.o.maxBatchBytes, this.limitBytes));
      if (batch.length === 0) continue;
      this.slots.tryAcquire();
      this.inFlightEvents += batch.length;
      void this.send(batch);
    }
  }

  private readonly flushTimer = (): void => {
    this.timer = undefined;
    this.flushing++;
    this.pump();
    this.flushing--;
  };

  /**
   * Sends a batch until it is answered or given up. Called holding a slot; the slot is let go
   * while the batch waits out a backoff, so other batches keep flowing. A Retry-After pause is kept
   * holding it: every request waits that one out anyway.
   */
  private async send(batch: Entry[]): Promise<void> {
    const started = this.o.now();
    let split = false;
    try {
      for (let retry = 0; ; retry++) {
        const wait = this.pausedUntil - this.o.now();
        if (wait > 0) await this.o.sleep(wait);
        const error = await this.attempt(batch, retry);
        if (error === 'split') split = true;
        if (error === 'split' || error === 'done') return;
        const decision = this.decide(batch, error, retry, started);
        if (decision === undefined) return;
        if (decision.pause) {
          this.pausedUntil = Math.max(this.pausedUntil, this.o.now() + decision.delayMs);
          await this.o.sleep(decision.delayMs);
        } else {
          this.slots.release();
          this.pump();
          await this.o.sleep(decision.delayMs);
          await this.slots.acquire();
        }
      }
    } catch (err) {
      // A bug in the client itself: never leave flush() waiting.
      this.finish(batch, 0, undefined, toTallyError(err));
    } finally {
      this.slots.release();
      // The parts of a split batch leave at once, as a flush() would send them.
      if (split) this.flushing++;
      this.pump();
      if (split) this.flushing--;
    }
  }

  /** One request; returns the error to retry on, or what became of the batch. */
  private async attempt(batch: Entry[], retry: number): Promise<TallyError | 'done' | 'split'> {
    for (const e of batch) e.attempts++;
    this.counters.batches++;
    if (retry > 0) this.counters.retries++;
    const body = `{"sentAt":${this.o.now()},"events":[${batch.map((e) => e.json).join(',')}]}`;
    const outcome = await postBatch(body, this.transport);
    if ('result' in outcome) {
      this.finish(batch, 200, outcome.result);
      return 'done';
    }
    if (outcome.error.status === 413) {
      this.split(batch, outcome.error);
      return 'split';
    }
    return outcome.error;
  }

  /** The retry to make after `error`, or undefined once the batch has been ended. */
  private decide(batch: Entry[], error: TallyError, retry: number, started: number) {
    const attempts = Math.max(...batch.map((e) => e.attempts));
    const decision = decideRetry(
      {
        status: error.status,
        retryAfterMs: error.retryAfterMs,
        retry,
        attempts,
        elapsedMs: this.o.now() - started,
      },
      this.o as RetryPolicy,
      this.o.random(),
    );
    if (decision.kind === 'retry') return decision;
    const final =
      decision.kind === 'fail'
        ? error
        : new TallyError({
            status: 0,
            code: 'retries_exhausted',
            detail: `Gave up after ${attempts} attempts: ${error.message}`,
            requestId: error.requestId,
            cause: error,
          });
    this.o.onError(final);
    this.finish(batch, error.status, undefined, final);
    return undefined;
  }

  private rejectOversized(e: Entry, maxBytes: number): void {
    const error = new TallyError({
      status: 0,
      code: 'event_too_large',
      detail: `Event ${e.id} is ${e.bytes} bytes; a request may carry at most ${maxBytes}. Not sent.`,
    });
    this.counters.gaveUp++;
    this.o.onError(error);
    this.o.onResult?.({ eventIds: [e.id], status: 0, error, attempts: e.attempts });
    this.settled(e);
  }

  /** 413: split by the limits the server stated, and queue the parts first. */
  private split(batch: Entry[], error: TallyError): void {
    const plan = planSplit(batch, error.body);
    if (plan.limitEvents !== null) this.limitEvents = plan.limitEvents;
    if (plan.limitBytes !== null) this.limitBytes = plan.limitBytes;
    this.inFlightEvents -= batch.length;
    if (plan.parts.length === 0) {
      // One event that can never be accepted.
      for (const e of batch) this.rejectOversized(e, plan.limitBytes ?? e.bytes - 1);
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
      this.inFlightEvents += spent.length;
      this.finish(spent, 413, undefined, exhausted);
    }
    this.queue.unshift(plan.parts.flat().filter((e) => e.attempts < this.o.maxAttempts));
  }

  private finish(batch: Entry[], status: number, result?: IngestResult, error?: TallyError): void {
    this.inFlightEvents -= batch.length;
    if (result) {
      this.counters.accepted += result.accepted;
      this.counters.duplicates += result.duplicates;
      this.counters.rejectedByServer += result.rejected;
      if (result.rejected > 0) this.reportRejections(result);
    } else if (status >= 400 && error?.code !== 'retries_exhausted') {
      this.counters.rejectedByServer += batch.length;
    } else {
      this.counters.gaveUp += batch.length;
    }
    const attempts = batch.reduce((m, e) => Math.max(m, e.attempts), 0);
    try {
      this.o.onResult?.({ eventIds: batch.map((e) => e.id), status, result, error, attempts });
    } finally {
      for (const e of batch) this.settled(e);
    }
  }

  /**
   * Per-event rejections of a 200 reach `onError` too, once per code with its count and the
   * first listed error, so that the default `console.error` shows why events were refused.
   */
  private reportRejections(result: IngestResult): void {
    const counts: Record<string, number> = { ...(result.errorCounts as Record<string, number> | undefined) };
    if (Object.keys(counts).length === 0) {
      for (const e of result.errors) counts[e.code] = (counts[e.code] ?? 0) + 1;
    }
    for (const [code, n] of Object.entries(counts)) {
      const first = result.errors.find((e) => e.code === code);
      const why = first ? ` (${first.field}: ${first.message})` : '';
      this.o.onError(
        new TallyError({
          status: 200,
          code,
          detail: `${n} event${n === 1 ? '' : 's'} rejected by the server${why}; they are not resent.`,
          errors: result.errors.filter((e) => e.code === code),
          body: result as unknown as Record<string, unknown>,
        }),
      );
    }
  }

  /** An event is answered (or dropped): its spool segment and flush() waiters learn it. */
  private settled(e: Entry): void {
    const segment = e.segment;
    if (segment) void this.spool!.then((s) => s.answered(segment)).catch(() => undefined);
    this.waiters.settled(e.seq);
  }
}

function spoolError(err: unknown): TallyError {
  return new TallyError({ status: 0, code: 'spool_error', detail: String(err), cause: err });
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
