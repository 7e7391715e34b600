import type { CompiledPlan } from './compiled-plan';
import type { PlannedEvent, Violation, ViolationCode } from './plan.types';

/** Where the plan's verdicts go: the request's errors and warnings (ingest's EventValidator). */
export interface IssueSink<E> {
  /** Rejects an event that passed the field rules, with these errors. */
  rejectLater(event: E, issues: Violation[]): void;
  /** Adds these warnings to an accepted event. */
  warnLater(event: E, issues: Violation[]): void;
}

/** An event the plan rejected under `enforce`, for the quarantine. */
export interface Rejection<E> {
  event: E;
  code: ViolationCode;
  violations: Violation[];
}

/**
 * Applies one app's plan to the events of one request, after the field rules and the PII guard.
 * Violations are warnings under `flag` and rejections under `enforce`; rejected events are kept
 * in `rejected` for the quarantine, and every violation is counted by code.
 */
export class PlanGate<E extends PlannedEvent> {
  readonly rejected: Rejection<E>[] = [];
  readonly violations: Record<ViolationCode, number> = { schema_violation: 0, unplanned_event: 0 };

  constructor(
    private readonly plan: CompiledPlan,
    private readonly sink: IssueSink<E>,
  ) {}

  /** Whether `event` is kept (it follows the plan, or only breaks it under `flag`). */
  admit(event: E): boolean {
    const found = this.plan.check(event);
    if (found === null) return true;
    for (const v of found) this.violations[v.code]++;
    if (this.plan.rejects(found)) {
      this.sink.rejectLater(event, found);
      this.rejected.push({ event, code: found[0].code, violations: found });
      return false;
    }
    this.sink.warnLater(event, found);
    return true;
  }
}
