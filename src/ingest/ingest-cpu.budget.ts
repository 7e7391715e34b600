import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '@app/config/config';
import { AppError } from '@app/common/app-error';
import { KeyTimeBudgets } from '@app/common/rate-limit/time-budget';

/**
 * Reading a body costs the server more than the request's own code shows: Node's socket reads
 * and HTTP parser, the stream's chunks, and collecting the garbage of the parsed events. That
 * work runs outside any one request's code, so it is charged per decoded byte instead, at the
 * rate measured on a 2-core machine (about 11 ms of server CPU for a 950 KB batch, of which
 * parsing and validation are 2 to 3 ms).
 */
export const BODY_BYTES_PER_CPU_MS = 128 * 1024;

/**
 * The CPU one ingest request spent on its own work: decoding and parsing the body, validating
 * the events (process CPU time over each synchronous phase, so waits such as the upload or the
 * database are not counted, nor is time the machine gave to other processes), plus the cost of
 * reading its body (BODY_BYTES_PER_CPU_MS).
 */
export class CpuMeter {
  ms = 0;

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

  /** Charges the reading of a body of `bytes` decoded bytes. */
  chargeBody(bytes: number): void {
    this.ms += bytes / BODY_BYTES_PER_CPU_MS;
  }
}

/**
 * The ingest CPU budget of each key on this instance (INGEST_CPU_MS_PER_SECOND), the same
 * mechanism as the read time budget: a key that was idle may spend one second's share at once;
 * past its share, its requests get 429 until the credit refills. Rejected events cost as much
 * as accepted ones, since parsing and validating them is the cost.
 */
@Injectable()
export class IngestCpuBudgets extends KeyTimeBudgets {
  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {
    super((msPerSecond) => msPerSecond);
  }

  /** Admits a request of the key, or throws 429 `rate_limited` while it is over its share. */
  admit(keyId: string): CpuMeter {
    const msPerSecond = this.config.ingestCpuMsPerSecond;
    const admission = this.take(keyId, Number.POSITIVE_INFINITY, msPerSecond);
    if (!admission.ok) {
      const retryAfterMs = admission.reason === 'time' ? admission.retryAfterMs : 1000;
      throw new AppError(
        'rate_limited',
        `This key's ingest requests used more than ${msPerSecond} ms of server CPU per second; nothing was stored. Retry after Retry-After.`,
        {
          // The body is not read: closing the connection spares the server the rest of the upload.
          headers: {
            'Retry-After': String(Math.max(1, Math.ceil(retryAfterMs / 1000))),
            Connection: 'close',
          },
          extra: { limitCpuMsPerSecond: msPerSecond },
        },
      );
    }
    return new CpuMeter();
  }

  /** The request admitted with `meter` has ended: charge what it spent. */
  charge(keyId: string, meter: CpuMeter): void {
    this.give(keyId, meter.ms, this.config.ingestCpuMsPerSecond);
  }
}
