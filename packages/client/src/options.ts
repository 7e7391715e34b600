import type { TallyError } from './errors.js';
import type { IngestResult } from './types.js';

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

export type Settings = Required<
  Omit<TallyClientOptions, 'spoolDir' | 'onResult' | 'fetch' | 'endpoint' | 'ingestKey'>
> &
  Pick<TallyClientOptions, 'spoolDir' | 'onResult'>;

const defaultSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export function settingsOf(options: TallyClientOptions): Settings {
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

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
