import { CallHandler, ExecutionContext, Inject, Injectable, NestInterceptor } from '@nestjs/common';
import type { Request } from 'express';
import { Observable, finalize } from 'rxjs';
import { requestKey } from './authenticated-request';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { AppError } from '@app/common/app-error';
import { KeyTimeBudgets } from '@app/common/rate-limit/time-budget';

// A read turned away for concurrency usually finds room within a second: reads end within
// READ_STATEMENT_TIMEOUT_MS, and most in milliseconds.
const CONCURRENCY_RETRY_AFTER_SECONDS = 1;
// A key that was idle may spend one second of read time at once (one slow read).
const TIME_BURST_MS = 1000;

/**
 * The reads of each key on this instance: how many run, and how much read time the key has
 * left. One instance is shared by every read controller.
 */
@Injectable()
export class ReadSlots extends KeyTimeBudgets {
  constructor() {
    super(() => TIME_BURST_MS);
  }
}

/**
 * Bounds what one key's reads may cost on this instance: at most READ_MAX_CONCURRENT_PER_KEY
 * running at once, and at most READ_TIME_MS_PER_SECOND of read time per second (a short burst
 * allowed). The request rate alone does not bound cost: a few expensive reads per second can
 * hold a database core, and other apps' reads then wait behind them. Runs after the key guards
 * and the rate limit.
 */
@Injectable()
export class ReadConcurrencyInterceptor implements NestInterceptor {
  constructor(
    private readonly slots: ReadSlots,
    @Inject(APP_CONFIG)
    private readonly config: ConfigSlice<'readMaxConcurrentPerKey' | 'readTimeMsPerSecond'>,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const keyId = requestKey(context.switchToHttp().getRequest<Request>()).id;
    const { readMaxConcurrentPerKey: maxRunning, readTimeMsPerSecond: msPerSecond } = this.config;
    const admission = this.slots.take(keyId, maxRunning, msPerSecond);
    if (!admission.ok && admission.reason === 'concurrency') {
      throw new AppError(
        'rate_limited',
        `This key already has ${maxRunning} reads running; wait for one to finish.`,
        {
          headers: { 'Retry-After': String(CONCURRENCY_RETRY_AFTER_SECONDS) },
          extra: { limitConcurrentReads: maxRunning },
        },
      );
    }
    if (!admission.ok) {
      throw new AppError(
        'rate_limited',
        `This key's reads took more than ${msPerSecond} ms of read time per second; retry after Retry-After, or make the reads cheaper (narrower from/to, filters).`,
        {
          headers: { 'Retry-After': String(Math.max(1, Math.ceil(admission.retryAfterMs / 1000))) },
          extra: { limitReadMsPerSecond: msPerSecond },
        },
      );
    }
    const started = performance.now();
    return next
      .handle()
      .pipe(finalize(() => this.slots.give(keyId, performance.now() - started, msPerSecond)));
  }
}
