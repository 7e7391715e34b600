import { AppError } from '@app/common/app-error';
import type { ConfigSlice } from '@app/config/config';
import { maxEventsPerRequest } from './ingest.limits';

/** The settings a 413 reports. */
export type BatchLimits = ConfigSlice<'ingestMaxEvents' | 'ingestRateEvents' | 'ingestMaxBytes'>;

/**
 * 413 with what an SDK needs to split the batch: the limits, and what this request held.
 * `receivedEvents` is null when the body was too large to read; `receivedBytes` is then the
 * (decoded) size at which reading stopped, so the true size is at least that.
 */
export function batchTooLarge(
  config: BatchLimits,
  received: { events: number | null; bytes: number },
  detail: string,
  headers?: Record<string, string>,
): AppError {
  return new AppError('payload_too_large', detail, {
    extra: {
      limitEvents: maxEventsPerRequest(config),
      limitBytes: config.ingestMaxBytes,
      receivedEvents: received.events,
      receivedBytes: received.bytes,
    },
    headers,
  });
}
