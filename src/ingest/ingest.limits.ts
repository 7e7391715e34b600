import { DAY_MS } from '@app/common/time';

export { EVENT_LIMITS } from '@app/common/events/event-fields';

/** A client clock off by more than this (per `sentAt`) has its event times corrected. */
export const CLOCK_SKEW_TOLERANCE_MS = 5 * 60_000;
/** An effective time further ahead than this is clamped to the receive time. */
export const FUTURE_TOLERANCE_MS = 10 * 60_000;
/** The response lists at most this many errors, and this many warnings, per event. */
export const MAX_ISSUES_PER_EVENT = 10;

export const REDACTED = '[redacted]';

/**
 * The most events one request may carry: INGEST_MAX_EVENTS, or the per-window event rate when
 * that is lower, since a batch over the rate could never be accepted and a client retrying it on
 * 429 would loop forever. A 413 tells the client to split instead.
 */
export function maxEventsPerRequest(config: { ingestMaxEvents: number; ingestRateEvents: number }): number {
  return Math.min(config.ingestMaxEvents, config.ingestRateEvents);
}

/**
 * The dedup window, which is also the age past which an event is refused (`event_too_old`):
 * INGEST_MAX_EVENT_AGE_DAYS, in milliseconds.
 */
export function dedupWindowMs(config: { ingestMaxEventAgeDays: number }): number {
  return config.ingestMaxEventAgeDays * DAY_MS;
}

/**
 * How long after its receive time an event may still be written: half the export horizon
 * (EXPORT_SETTLE_MS). The other half is left for the commit itself, so that every event is
 * committed, and visible, before its receive time falls behind the horizon.
 */
export function commitWithinMs(config: { exportSettleMs: number }): number {
  return Math.floor(config.exportSettleMs / 2);
}
