import { TallyError } from './errors.js';
import type { Settings } from './options.js';
import type { Entry, SendQueue, Slots } from './queue.js';
import { decideRetry, type RetryPolicy } from './retry.js';
import { planSplit } from './split.js';
import { postBatch, toTallyError, unref, type TransportOptions } from './transport.js';
import type { IngestResult } from './types.js';

/** What the sender has counted; `TallyClient.stats()` reports it. */
export interface SenderCounters {
  accepted: number;
  duplicates: number;
  rejectedByServer: number;
  gaveUp: number;
  dropped: number;
  retries: number;
  batches: number;
}

/**
 * The sending half of the client: takes batches off the queue while a request slot is free and
 * a batch is due, sends each until it is answered or given up (retries with the same eventIds,
 * a split on 413, the server's Retry-After), and counts what became of every event.
 */
export class BatchSender {
  /** Events in a request that has not been answered yet. */
  inFlightEvents = 0;
  /** While > 0, batches leave without waiting to be full (flush(), a split). */
  flushing = 0;
  /** After shutdown(): nothing waits for a full batch any more. */
  closed = false;
  readonly counters: SenderCounters = {
    accepted: 0,
    duplicates: 0,
    rejectedByServer: 0,
    gaveUp: 0,
    dropped: 0,
    retries: 0,
    batches: 0,
  };
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** Until when the server asked every request to wait (Retry-After). */
  private pausedUntil = 0;
  /** Limits learned from a 413. */
  private limitEvents = Infinity;
  private limitBytes = Infinity;

  constructor(
    private readonly o: Settings,
    private readonly transport: TransportOptions,
    private readonly queue: SendQueue,
    private readonly slots: Slots,
    /** An event is answered or dropped. */
    private readonly onSettled: (e: Entry) => void,
  ) {}

  /** Stops the timer of a batch waiting to be full. */
  stopTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Starts batches while a request slot is free and a batch is due (full, or flushing). */
  pump(): void {
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
    this.onSettled(e);
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
      for (const e of batch) this.onSettled(e);
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
}
