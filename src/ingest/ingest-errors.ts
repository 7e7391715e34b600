import { AppError } from '@app/common/app-error';
import type { AppConfig } from '@app/config/config';
import { maxEventsPerRequest } from './ingest.limits';

/**
 * 413 with what an SDK needs to split the batch: the limits, and what this request held.
 * `receivedEvents` is null when the body was too large to read; `receivedBytes` is then the
 * (decoded) size at which reading stopped, so the true size is at least that.
 */
export function batchTooLarge(
  config: AppConfig,
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
