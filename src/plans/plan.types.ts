/** `off`: stored, not applied. `flag`: violations are warnings. `enforce`: they reject the event. */
export type PlanMode = 'off' | 'flag' | 'enforce';
/** What happens to an event whose name the plan does not list. */
export type UnplannedPolicy = 'allow' | 'flag' | 'reject';
export type FloatValueRule = 'optional' | 'required' | 'forbidden';

export const PLAN_MODES: readonly PlanMode[] = ['off', 'flag', 'enforce'];
export const UNPLANNED_POLICIES: readonly UnplannedPolicy[] = ['allow', 'flag', 'reject'];
export const FLOAT_VALUE_RULES: readonly FloatValueRule[] = ['optional', 'required', 'forbidden'];

export interface EventDefinition {
  description?: string;
  floatValue?: FloatValueRule;
  /** A JSON Schema (draft 2020-12) of the payload object. */
  payload?: Record<string, unknown> | boolean;
}

/** A tracking plan as written by an admin (docs/ingest.md, "Tracking plans"). */
export interface TrackingPlan {
  mode: PlanMode;
  unplanned: UnplannedPolicy;
  events: Record<string, EventDefinition>;
}

/** One version of an app's plan as stored. */
export interface PlanVersion {
  appId: string;
  /** 0 when the app has no plan. */
  version: number;
  plan: TrackingPlan;
  /** Epoch ms, or null when the app has no plan. */
  createdAt: number | null;
}

/** Why a plan cannot be stored: where, and what is wrong. */
export interface PlanProblem {
  path: string;
  message: string;
}

export type { PlannedEvent, Violation, ViolationCode } from '@app/common/plans/ingest-plans.port';
