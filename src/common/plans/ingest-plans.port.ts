import type { EventValues } from '@app/common/events/event-fields';

/**
 * What ingest needs of the tracking plans, as a port: ingest depends on this interface, the
 * plans module implements it (and may then build on ingest's evaluation), so the two never
 * import each other both ways.
 */

export type ViolationCode = 'schema_violation' | 'unplanned_event';

/** One rule an event breaks: `field` is the path in the event (`payload.plan`, `floatValue`). */
export interface Violation {
  field: string;
  code: ViolationCode;
  message: string;
}

/** What a plan reads of an event that passed the field rules. */
export interface PlannedEvent {
  eventName: string;
  floatValue: number | null;
  payload: Record<string, string | number | boolean> | null;
}

/** An event as ingest would have stored it (the shape of ingest's accepted event). */
export type QuarantineEvent = EventValues & PlannedEvent;

/** An event rejected into the quarantine, with why. */
export interface Rejection<E> {
  event: E;
  code: ViolationCode;
  violations: Violation[];
}

/** Where the plan's verdicts go: the request's errors and warnings (ingest's EventValidator). */
export interface IssueSink<E> {
  /** Rejects an event that passed the field rules, with these errors. */
  rejectLater(event: E, issues: Violation[]): void;
  /** Adds these warnings to an accepted event. */
  warnLater(event: E, issues: Violation[]): void;
}

/** A plan as ingest holds it: from `IngestPlans.active`, or compiled for a dry run. */
export interface AppliedPlan {
  /** Whether the plan applies to events (its mode is not `off`). */
  readonly active: boolean;
}

/** One request's plan: its verdict per event, gathered for `IngestPlans.settle`. */
export interface RequestGate<E> {
  /** Whether `event` is kept (it follows the plan, or only breaks it under `flag`). */
  admit(event: E): boolean;
}

/** The tracking plans as ingest applies them. */
export interface IngestPlans {
  /** The app's plan in force, or null when it has none. */
  active(appId: string): Promise<AppliedPlan | null>;
  /** The gate that applies `plan` to one request's events; null when no plan applies. */
  gate<E extends PlannedEvent>(plan: AppliedPlan | null, sink: IssueSink<E>): RequestGate<E> | null;
  /**
   * After the write: counts the gate's verdicts and keeps its rejections in the quarantine while
   * the app's day has room; returns those it had no room for.
   */
  settle<E extends QuarantineEvent>(
    appId: string,
    receivedAt: number,
    gate: RequestGate<E>,
  ): Promise<Rejection<E>[]>;
  /** Keeps rejected events in the quarantine within `maxPerDay`; returns how many were kept (the first). */
  keep(
    appId: string,
    receivedAt: number,
    rejected: Rejection<QuarantineEvent>[],
    maxPerDay: number,
  ): Promise<number>;
  /** Whether the app's receive day is known to have no room left under `maxPerDay` (keep would keep none). */
  quarantineFull(appId: string, receivedAt: number, maxPerDay: number): boolean;
}

/** The injection token of `IngestPlans`. */
export const INGEST_PLANS = Symbol('IngestPlans');
