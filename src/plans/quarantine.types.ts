import type { PlannedEvent, Violation, ViolationCode } from './plan.types';

/** An event as ingest would have stored it (the shape of ingest's accepted event). */
export interface QuarantineEvent extends PlannedEvent {
  eventId: string | null;
  anonymousUserId: string | null;
  sessionId: string | null;
  /** As sent, epoch ms. */
  eventTime: number | null;
  /** The effective time, epoch ms. */
  ts: number;
  isTestMode: boolean;
  platform: string | null;
  appVersion: string | null;
  buildNumber: string | null;
  osVersion: string | null;
  deviceModel: string | null;
  locale: string | null;
  timezone: string | null;
}

/** One quarantined event as read back. */
export interface QuarantineRow extends QuarantineEvent {
  id: string;
  appId: string;
  /** Epoch microseconds, for the cursor. */
  receivedUs: bigint;
  code: ViolationCode;
  violations: Violation[];
}

/** One quarantined event as a replay reads it: the event, its id, and its receive time for the cursor. */
export interface ReplayRow extends QuarantineEvent {
  id: string;
  /** Epoch microseconds, as a decimal string. */
  receivedUs: string;
}

export interface QuarantineFilters {
  eventName?: string;
  code?: ViolationCode;
  /**
   * Only the plan's own rejections, which a plan can let through on replay; the field-rule
   * rejections the SDK formats keep (`event_too_old`, …) stay for inspection.
   */
  replayable?: boolean;
}
