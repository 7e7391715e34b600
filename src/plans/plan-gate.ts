import type { CompiledPlan } from './compiled-plan';
import type { PlannedEvent, Violation, ViolationCode } from './plan.types';

/** Where the plan's verdicts go: the request's errors and warnings (ingest's EventValidator). */
export interface IssueSink<E> {
  /** Rejects an event that passed the field rules, with these errors. */
  rejectLater(event: E, issues: Violation[]): void;
  /** Adds these warnings to an accepted event. */
  warnLater(event: E, issues: Violation[]): void;
}

/** Per event name: events accepted (`flagged` of them with warnings) and rejected; violations by rule. */
export interface QualityTally {
  accepted: number;
  flagged: number;
  rejected: number;
  /** `field NUL rule` → violations. */
  rules: Map<string, number>;
}

function newTally(): QualityTally {
  return { accepted: 0, flagged: 0, rejected: 0, rules: new Map() };
}

/** The rule a violation names: the keyword at the end of its message (`… (enum).`). */
export function ruleOf(v: Violation): string {
  return /\((\w+)\)\.?$/.exec(v.message)?.[1] ?? v.code;
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
  /** What the plan did, per event name, for the data-quality counts. */
  readonly tally = new Map<string, QualityTally>();

  constructor(
    private readonly plan: CompiledPlan,
    private readonly sink: IssueSink<E>,
  ) {}

  /** Whether `event` is kept (it follows the plan, or only breaks it under `flag`). */
  admit(event: E): boolean {
    const found = this.plan.check(event);
    let t = this.tally.get(event.eventName);
    if (t === undefined) this.tally.set(event.eventName, (t = newTally()));
    if (found === null) {
      t.accepted++;
      return true;
    }
    for (const v of found) {
      this.violations[v.code]++;
      const rule = `${v.field}\u0000${ruleOf(v)}`;
      t.rules.set(rule, (t.rules.get(rule) ?? 0) + 1);
    }
    if (this.plan.rejects(found)) {
      t.rejected++;
      this.sink.rejectLater(event, found);
      this.rejected.push({ event, code: found[0].code, violations: found });
      return false;
    }
    t.accepted++;
    t.flagged++;
    this.sink.warnLater(event, found);
    return true;
  }
}
