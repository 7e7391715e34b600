import { SLICE_MS, WorkSlices } from '@app/common/work-slices';
import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { AppError } from '@app/common/app-error';
import { KeyTimeBudgets } from '@app/common/rate-limit/time-budget';
import { KeyTurns } from '@app/common/rate-limit/key-turns';
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

  /** `budgets`: the key's budget and turns; a meter without them (the dry run, the CLI) has no turn to wait for. */
  constructor(
    private readonly budgets?: { beginTurn(m: CpuMeter): Promise<void>; endTurn(m: CpuMeter): void },
  ) {}

  /**
   * Waits for the key's turn at the request's CPU work, parsing and validating: one request of a
   * key at a time (IngestCpuBudgets). Throws 429 if the key ran out of budget while it waited.
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
 * The ingest CPU budget of each key on this instance (INGEST_CPU_MS_PER_SECOND), the same
 * mechanism as the read time budget: a key that was idle has one second's share of credit;
 * past its share, its requests get 429 until the credit refills. Rejected events cost as much
 * as accepted ones, since parsing and validating them is the cost.
 *
 * A key's requests also take turns at that work (KeyTurns): one parses and validates at a time,
 * and the next starts on a later turn of the event loop, after what other keys' requests have
 * waiting. Without turns, a key's batches that arrive together (the 4 connections of a client
 * coming back after a Retry-After) ran back to back, and another app's request waited for all
 * of them. The budget is charged at the end of each turn and checked again at the start of the
 * next, so a key's queued requests get their 429 as soon as it has spent its share.
 *
 * Shares bind only while the key is contended: while another key has sent a request to this
 * instance within the last second (ActiveKeys). A key alone is neither paused nor refused, and
 * its credit is kept full, so the one relay key of a company gets the whole instance; the moment
 * another app's request arrives, both are held to their shares again.
 */
@Injectable()
export class IngestCpuBudgets extends KeyTimeBudgets {
  private readonly turns = new KeyTurns();
  private readonly active = new ActiveKeys(CONTENTION_WINDOW_MS);

  constructor(@Inject(APP_CONFIG) private readonly config: ConfigSlice<'ingestCpuMsPerSecond'>) {
    super((msPerSecond) => msPerSecond);
  }

  /**
   * The 429 that `admit` would answer the key now, or null; admits nothing. For a request whose
   * key is found in its body's first bytes: refused there, the rest of the body is never read.
   */
  refusal(keyId: string, now = Date.now()): AppError | null {
    const msPerSecond = this.config.ingestCpuMsPerSecond;
    this.active.touch(keyId, now);
    if (!this.active.othersActive(keyId, now)) this.forgive(keyId, msPerSecond);
    const retryAfterMs = this.overdrawn(keyId, msPerSecond, now);
    return retryAfterMs === null ? null : this.overBudget(retryAfterMs, { Connection: 'close' });
  }

  /** Admits a request of the key, or throws 429 `rate_limited` while it is over its share. */
  admit(keyId: string, now = Date.now()): CpuMeter {
    // The body is not read: closing the connection spares the server the rest of the upload.
    const refused = this.refusal(keyId, now);
    if (refused !== null) throw refused;
    const admission = this.take(keyId, Number.POSITIVE_INFINITY, this.config.ingestCpuMsPerSecond, now);
    if (!admission.ok) {
      throw this.overBudget(admission.reason === 'time' ? admission.retryAfterMs : 1000, {
        Connection: 'close',
      });
    }
    return new CpuMeter({
      beginTurn: (meter) => this.beginTurn(keyId, meter),
      endTurn: (meter) => this.endTurn(keyId, meter),
    });
  }

  /** The request admitted with `meter` has ended: charge what it spent. */
  charge(keyId: string, meter: CpuMeter): void {
    this.endTurn(keyId, meter);
    this.give(keyId, meter.ms - meter.charged, this.config.ingestCpuMsPerSecond);
  }

  private async beginTurn(keyId: string, meter: CpuMeter): Promise<void> {
    await this.turns.take(keyId);
    meter.holding = true;
    if (!this.active.othersActive(keyId, Date.now())) this.forgive(keyId, this.config.ingestCpuMsPerSecond);
    const retryAfterMs = this.overdrawn(keyId, this.config.ingestCpuMsPerSecond);
    if (retryAfterMs !== null) {
      this.endTurn(keyId, meter);
      throw this.overBudget(retryAfterMs, {});
    }
  }

  private endTurn(keyId: string, meter: CpuMeter): void {
    if (!meter.holding) return;
    meter.holding = false;
    // Charged now, so that the next request's check sees this one's cost.
    const spent = meter.ms - meter.charged;
    this.spend(keyId, spent);
    meter.charged = meter.ms;
    // Alone, the key's next turn follows at once; contended, after its pause.
    const share = this.active.othersActive(keyId, Date.now()) ? this.config.ingestCpuMsPerSecond / 1000 : 1;
    this.turns.release(keyId, spent, share);
  }

  private overBudget(retryAfterMs: number, headers: Record<string, string>): AppError {
    const msPerSecond = this.config.ingestCpuMsPerSecond;
    return new AppError(
      'rate_limited',
      `This key's ingest requests used more than ${msPerSecond} ms of server CPU per second; nothing was stored. Retry after Retry-After.`,
      {
        headers: { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterMs / 1000))), ...headers },
        extra: { limitCpuMsPerSecond: msPerSecond },
      },
    );
  }
}

/** Another key's request within this long makes a key contended, and its share bind. */
const CONTENTION_WINDOW_MS = 1000;
