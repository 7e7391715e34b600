import { SLICE_MS, WorkSlices } from '@app/common/work-slices';
import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { AppError } from '@app/common/app-error';
import { KeyTurns, MAX_PAUSE_MS } from '@app/common/rate-limit/key-turns';
import { ActiveKeys } from '@app/common/rate-limit/active-keys';

/**
 * Reading a body costs the server more than the request's own code shows: Node's socket reads
 * and HTTP parser, the stream's chunks, and collecting the garbage of the parsed events. That
 * work runs outside any one request's code, so it is charged per decoded byte instead, at a
 * rate taken from the server's measured CPU per body byte (docs/performance.md, "Figures behind
 * the code").
 */
export const BODY_BYTES_PER_CPU_MS = 128 * 1024;

/**
 * What keeping one rejected event in the quarantine costs the database (an insert of the event's
 * columns, its code and errors into a partitioned table with its index), charged to the key like
 * its own CPU: without it, a key whose every message is rejected through the SDK formats made
 * the database write a thousand rows per request for the price of a parse.
 */
export const QUARANTINE_ROW_CPU_MS = 0.05;

/**
 * The CPU one ingest request spent on its own work: decoding and parsing the body, validating
 * the events (process CPU time over each synchronous phase, so waits such as the upload or the
 * database are not counted, nor is time the machine gave to other processes), plus the cost of
 * reading its body (BODY_BYTES_PER_CPU_MS).
 */
export class CpuMeter {
  ms = 0;
  /** Of `ms`, what the key was charged already (at the end of its turn). */
  charged = 0;
  /** Whether this request holds its key's turn (`beginTurn`). */
  holding = false;
  /** While the request is in its key's backlog (admitted, not yet through its turn): its size and expected cost. */
  waiting: { bytes: number; expectedMs: number } | null = null;

  /** `budgets`: the key's budget and turns; a meter without them (the dry run, the CLI) has no turn to wait for. */
  constructor(
    private readonly budgets?: { beginTurn(m: CpuMeter): Promise<void>; endTurn(m: CpuMeter): void },
  ) {}

  /**
   * Waits for the key's turn at the request's CPU work, parsing and validating: one request of a
   * key at a time (IngestCpuBudgets).
   */
  beginTurn(): Promise<void> {
    return this.budgets === undefined ? Promise.resolve() : this.budgets.beginTurn(this);
  }

  /** Ends the turn (no-op without one): the next request of the key may start its CPU work. */
  endTurn(): void {
    this.budgets?.endTurn(this);
  }

  start(): NodeJS.CpuUsage {
    return process.cpuUsage();
  }

  stop(mark: NodeJS.CpuUsage): void {
    const spent = process.cpuUsage(mark);
    this.ms += (spent.user + spent.system) / 1000;
  }

  time<T>(work: () => T): T {
    const mark = this.start();
    try {
      return work();
    } finally {
      this.stop(mark);
    }
  }

  /**
   * Times `work` done in slices (WorkSlices), charging none of what other requests run between
   * them: process.cpuUsage counts the whole process.
   */
  async timeSliced<T>(work: (slices: WorkSlices) => Promise<T>): Promise<T> {
    let mark = this.start();
    const slices = new WorkSlices(SLICE_MS, {
      pause: () => this.stop(mark),
      resume: () => {
        mark = this.start();
      },
    });
    try {
      return await work(slices);
    } finally {
      this.stop(mark);
    }
  }

  /** Charges the reading of a body of `bytes` decoded bytes. */
  chargeBody(bytes: number): void {
    this.ms += bytes / BODY_BYTES_PER_CPU_MS;
  }

  /** Charges the database's work of keeping `rows` rejected events in the quarantine. */
  chargeQuarantineRows(rows: number): void {
    this.ms += rows * QUARANTINE_ROW_CPU_MS;
  }
}

/**
 * How long a key's waiting work may take to drain at its share before its next request is
 * refused: past it, the request would only wait, holding its body, for a turn so far off that
 * the client is better told when to come back.
 */
export const DRAIN_BOUND_MS = 250;

/**
 * What a key's request is expected to cost per byte of its body before the key has a measured
 * rate of its own: about what a valid batch costs the server (a 100-event batch of 23 KB takes
 * a third of a millisecond; a 950 KB batch of rejected events about 11 ms).
 */
export const DEFAULT_MS_PER_BYTE = 1 / (64 * 1024);

/** The size assumed for a body that declares none (chunked). */
const NOMINAL_BODY_BYTES = 64 * 1024;

/** How much of a key's measured cost per byte each new request moves. */
const RATE_WEIGHT = 0.25;

/** A 429 of the CPU share, and how long its answer is held (IngestCpuBudgets.hold). */
export interface Refusal {
  error: AppError;
  holdMs: number;
}

/** A key's requests admitted and not yet through their turn, and its measured cost per byte. */
interface Backlog {
  requests: number;
  /** Their expected CPU, ms. */
  ms: number;
  msPerByte: number;
}

/**
 * The ingest CPU share of each key on this instance (INGEST_CPU_MS_PER_SECOND), a
 * work-conserving scheduler of the work each request does on the event loop: parsing its body
 * and validating its events.
 *
 * A key's requests take turns at that work (KeyTurns): one parses and validates at a time, in
 * arrival order, and the next starts on a later turn of the event loop, after what other keys'
 * requests have waiting. Without turns, a key's batches that arrive together (the 4 connections
 * of a client coming back after a Retry-After) ran back to back, and another app's request
 * waited for all of them.
 *
 * Shares bind only while the key is contended: while another key has sent a request to this
 * instance within the last second (ActiveKeys). A key alone runs its turns back to back, so the
 * one relay key of a company gets the whole instance. Contended, each turn is followed by a
 * pause in proportion to its cost, so that the key holds the loop for at most its share of the
 * time.
 *
 * A 429 comes from waiting, not from CPU spent: a contended key's request is refused when the
 * work the key already has waiting would take longer than DRAIN_BOUND_MS to drain at its share
 * (what is left of its pause, and each waiting request's expected cost and pause), with a
 * Retry-After of that drain time. A request's expected cost is its declared body size at the
 * key's measured cost per byte. A request that was admitted waits for its turn and is served.
 */
@Injectable()
export class IngestCpuBudgets {
  private readonly turns = new KeyTurns();
  private readonly active = new ActiveKeys(CONTENTION_WINDOW_MS);
  private readonly backlogs = new Map<string, Backlog>();

  constructor(@Inject(APP_CONFIG) private readonly config: ConfigSlice<'ingestCpuMsPerSecond'>) {}

  /**
   * The 429 a request of the key would be answered now, with how long to hold it (`hold`), or
   * null; admits nothing. For a request whose key is found in its body's first bytes: refused
   * there, the rest of the body is never read.
   */
  refusal(keyId: string, now = Date.now()): Refusal | null {
    this.active.touch(keyId, now);
    // Alone, or with a share of the whole loop (1,000 ms a second or more), nothing binds.
    if (this.share() >= 1 || !this.active.othersActive(keyId, now)) return null;
    const drainMs = this.drainMs(keyId);
    if (drainMs <= DRAIN_BOUND_MS) return null;
    // The body is not read: closing the connection spares the server the rest of the upload.
    return { error: this.overBudget(drainMs), holdMs: Math.min(MAX_HOLD_MS, drainMs - DRAIN_BOUND_MS) };
  }

  /**
   * Waits before a refusal is answered, for as long as the key's waiting work stays past the
   * bound (at most MAX_HOLD_MS), and gives its error: a client that resends at once, ignoring
   * Retry-After, then cannot make the server refuse it faster than its work drains.
   */
  async hold(refused: Refusal): Promise<AppError> {
    if (refused.holdMs > 0) await new Promise((resolve) => setTimeout(resolve, refused.holdMs));
    return refused.error;
  }

  /**
   * Admits a request of the key with a body of `bytes` (as declared; a nominal size when
   * unknown), or throws 429 `rate_limited`, once held, while the key's waiting work is past the
   * drain bound.
   */
  async enter(keyId: string, bytes = NOMINAL_BODY_BYTES): Promise<CpuMeter> {
    const refused = this.refusal(keyId);
    if (refused !== null) throw await this.hold(refused);
    let backlog = this.backlogs.get(keyId);
    if (backlog === undefined) {
      backlog = { requests: 0, ms: 0, msPerByte: DEFAULT_MS_PER_BYTE };
      this.backlogs.set(keyId, backlog);
    }
    const expectedMs = bytes * backlog.msPerByte;
    backlog.requests++;
    backlog.ms += expectedMs;
    const meter = new CpuMeter({
      beginTurn: (m) => this.beginTurn(keyId, m),
      endTurn: (m) => this.endTurn(keyId, m),
    });
    meter.waiting = { bytes, expectedMs };
    return meter;
  }

  /** The request admitted with `meter` has ended. */
  charge(keyId: string, meter: CpuMeter): void {
    this.endTurn(keyId, meter);
    // A request that ended before its turn (an unreadable body) leaves the backlog too.
    this.leaveBacklog(keyId, meter);
  }

  /**
   * How long the key's waiting work would take to drain at its share: what is left of its pause,
   * and each request admitted and not yet through its turn, its expected cost and the pause after
   * it (capped as the pause is).
   */
  drainMs(keyId: string): number {
    const backlog = this.backlogs.get(keyId);
    const share = this.share();
    const waiting =
      backlog === undefined
        ? 0
        : backlog.ms + Math.min(backlog.requests * MAX_PAUSE_MS, backlog.ms * (1 / share - 1));
    return this.turns.pauseLeft(keyId) + waiting;
  }

  private async beginTurn(keyId: string, meter: CpuMeter): Promise<void> {
    await this.turns.take(keyId);
    meter.holding = true;
  }

  private endTurn(keyId: string, meter: CpuMeter): void {
    if (!meter.holding) return;
    meter.holding = false;
    const spent = meter.ms - meter.charged;
    meter.charged = meter.ms;
    this.leaveBacklog(keyId, meter, spent);
    // Alone, the key's next turn follows at once; contended, after its pause.
    const share = this.active.othersActive(keyId, Date.now()) ? this.share() : 1;
    this.turns.release(keyId, spent, share);
  }

  /** Takes the request out of its key's backlog once; a measured cost updates the key's rate. */
  private leaveBacklog(keyId: string, meter: CpuMeter, spentMs?: number): void {
    const waiting = meter.waiting;
    if (waiting === null) return;
    meter.waiting = null;
    const backlog = this.backlogs.get(keyId);
    if (backlog === undefined) return;
    backlog.requests--;
    backlog.ms = backlog.requests === 0 ? 0 : Math.max(0, backlog.ms - waiting.expectedMs);
    if (spentMs !== undefined && waiting.bytes > 0) {
      backlog.msPerByte += RATE_WEIGHT * (spentMs / waiting.bytes - backlog.msPerByte);
    }
    // A key with nothing waiting keeps no entry (what is left of its pause is in its turns): its
    // next requests start again from the default rate.
    if (backlog.requests === 0) this.backlogs.delete(keyId);
  }

  /** The key's share of one event loop, as a fraction. */
  private share(): number {
    return Math.min(1, this.config.ingestCpuMsPerSecond / 1000);
  }

  private overBudget(drainMs: number): AppError {
    const msPerSecond = this.config.ingestCpuMsPerSecond;
    return new AppError(
      'rate_limited',
      `This key's ingest requests already waiting would take more than ${DRAIN_BOUND_MS} ms to run at its share of server CPU (${msPerSecond} ms per second while other keys send); nothing was stored. Retry after Retry-After.`,
      {
        headers: { 'Retry-After': String(Math.max(1, Math.ceil(drainMs / 1000))), Connection: 'close' },
        extra: { limitCpuMsPerSecond: msPerSecond },
      },
    );
  }
}

/** The longest a refusal's answer is held. */
const MAX_HOLD_MS = 1000;

/** Another key's request within this long makes a key contended, and its share bind. */
const CONTENTION_WINDOW_MS = 1000;
