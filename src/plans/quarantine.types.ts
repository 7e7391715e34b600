import type { EventRow } from '@app/common/reads/event-record';
import type { QuarantineEvent, Violation, ViolationCode } from '@app/common/plans/ingest-plans.port';

export type { QuarantineEvent };

/** One quarantined event as read back: the stored row as events read it, and why it was kept. */
export type QuarantineRow = EventRow & {
  code: ViolationCode;
  violations: Violation[];
};

/** One quarantined event as a replay reads it: the event, its id, and its receive time for the cursor. */
export type ReplayRow = QuarantineEvent & {
  id: string;
  /** Epoch microseconds, as a decimal string. */
  receivedUs: string;
};

export interface QuarantineFilters {
  eventName?: string;
  code?: ViolationCode;
  /**
   * Only the plan's own rejections, which a plan can let through on replay; the field-rule
   * rejections the SDK formats keep (`event_too_old`, …) stay for inspection.
   */
  replayable?: boolean;
}
