import { utf8Length } from './encoding.js';
import { TallyError } from './errors.js';
import {
  settingsOf,
  type Settings,
  type ShutdownReport,
  type TallyClientOptions,
  type TallyStats,
} from './options.js';
import { FlushWaiters, SendQueue, Slots, type Entry } from './queue.js';
import { BatchSender } from './sender.js';
import { onTerminationSignals } from './signals.js';
import type { Spool } from './spool.js';
import { unref } from './transport.js';
import type { TallyEvent } from './types.js';
import { uuidv7 } from './uuid.js';

export type { BatchResult, ShutdownReport, TallyClientOptions, TallyStats } from './options.js';

/**
 * Batches events, sends them gzipped, retries with the same eventIds (so a retry after a lost
 * answer is a duplicate, never a second copy), splits on 413, and keeps an optional durable queue.
 * The parts: SendQueue and Slots (queue.ts), decideRetry (retry.ts), planSplit (split.ts),
 * postBatch (transport.ts), Spool (spool.ts) and onTerminationSignals (signals.ts).
 */
export class TallyClient {
  private readonly o: Settings;
  private readonly queue: SendQueue;
  private readonly sender: BatchSender;
  private readonly waiters = new FlushWaiters();
  private seq = 0;
  private pumpScheduled = false;
  private spool: Promise<Spool> | undefined;
  private stopSignals: (() => void) | undefined;

  constructor(options: TallyClientOptions) {
    if (!options.endpoint) throw new TypeError('TallyClient: endpoint is required');
    if (!options.ingestKey) throw new TypeError('TallyClient: ingestKey is required');
    this.o = settingsOf(options);
    const transport = {
      url: options.endpoint.replace(/\/+$/, '') + '/api/ingest',
      authorization: `Bearer ${options.ingestKey}`,
      fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
      gzipAboveBytes: this.o.gzipAboveBytes,
      requestTimeoutMs: this.o.requestTimeoutMs,
      now: this.o.now,
    };
    this.queue = new SendQueue({ maxEvents: this.o.maxQueueEvents, maxBytes: this.o.maxQueueBytes });
    const slots = new Slots(this.o.concurrency);
    this.sender = new BatchSender(this.o, transport, this.queue, slots, (e) => this.settled(e));
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
    const remaining = this.queue.length + this.sender.inFlightEvents;
    if (remaining === 0) return;
    const done = this.waiters.wait(this.seq, remaining);
    this.sender.flushing++;
    this.sender.pump();
    await done;
    this.sender.flushing--;
  }

  /** Flushes within `timeoutMs`, then stops timers and signal handling. Later track() calls throw. */
  async shutdown(options: { timeoutMs?: number } = {}): Promise<ShutdownReport> {
    const timeoutMs = options.timeoutMs ?? this.o.shutdownTimeoutMs;
    this.sender.closed = true;
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
    this.sender.stopTimer();
    const unsent = this.queue.length + this.sender.inFlightEvents;
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
    const c = this.sender.counters;
    return {
      queued: this.queue.length,
      inFlight: this.sender.inFlightEvents,
      ...c,
      rejected: c.rejectedByServer + c.gaveUp,
    };
  }

  // ---- tracking ----

  private entryFor(event: TallyEvent): Entry {
    if (this.sender.closed) {
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
      this.sender.counters.dropped++;
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
    this.sender.pump();
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
