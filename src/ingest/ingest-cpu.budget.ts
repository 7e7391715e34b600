import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '@app/config/config';
import { AppError } from '@app/common/app-error';
import { KeyTimeBudgets } from '@app/common/rate-limit/time-budget';

/**
 * The main-thread time one ingest request spent on its own work: decoding and parsing the body,
 * validating the events. Each phase is synchronous, so its wall time is its CPU time on the
 * event loop, and waits (the upload, the database) are not counted.
 */
export class CpuMeter {
  ms = 0;

  time<T>(work: () => T): T {
    const started = performance.now();
    try {
      return work();
    } finally {
      this.ms += performance.now() - started;
    }
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
          headers: { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterMs / 1000))) },
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
