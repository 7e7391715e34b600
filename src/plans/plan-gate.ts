import type { CompiledPlan } from './compiled-plan';
import type {
  IssueSink,
  PlannedEvent,
  Rejection,
  RequestGate,
  Violation,
  ViolationCode,
} from '@app/common/plans/ingest-plans.port';

export type { IssueSink, Rejection };

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

/** Reads one request's counts per event name; a name may come twice (see `PlanGate.forEachTally`). */
export type TallyReader = (
  eventName: string,
  accepted: number,
  flagged: number,
  rejected: number,
  rules: ReadonlyMap<string, number> | null,
) => void;

/**
 * Applies one app's plan to the events of one request, after the field rules and the PII guard.
 * Violations are warnings under `flag` and rejections under `enforce`; rejected events are kept
 * in `rejected` for the quarantine, and every violation is counted by code.
 *
 * The common case, an event that follows its definition, costs one lookup, the validator and one
 * counter in an array by definition index; events with violations and unplanned names are tallied
 * by name, which costs more but is rarer.
 */
export class PlanGate<E extends PlannedEvent> implements RequestGate<E> {
  readonly rejected: Rejection<E>[] = [];
  readonly violations: Record<ViolationCode, number> = { schema_violation: 0, unplanned_event: 0 };
  /** Events that followed their definition, by definition index; allocated on first use. */
  private clean: Uint32Array | null = null;
  /** The definition indexes counted in `clean`, in order of first use. */
  private readonly touched: number[] = [];
  /** Everything else, by event name. */
  private readonly others = new Map<string, QualityTally>();

  constructor(
    private readonly plan: CompiledPlan,
    private readonly sink: IssueSink<E>,
  ) {}

  /** Whether `event` is kept (it follows the plan, or only breaks it under `flag`). */
  admit(event: E): boolean {
    const def = this.plan.definition(event.eventName);
    const found = this.plan.verdict(def, event);
    if (found === null) {
      if (def === undefined) this.other(event.eventName).accepted++;
      else {
        const clean = (this.clean ??= new Uint32Array(this.plan.names.length));
        if (clean[def.index]++ === 0) this.touched.push(def.index);
      }
      return true;
    }
    const t = this.other(event.eventName);
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

  /**
   * What the plan did, per event name, for the data-quality counts: the events that followed
   * their definition first, then the others. A name may come twice; its counts add up.
   */
  forEachTally(read: TallyReader): void {
    const { clean, touched } = this;
    const names = this.plan.names;
    for (let i = 0; i < touched.length; i++) read(names[touched[i]], clean![touched[i]], 0, 0, null);
    for (const [name, t] of this.others) read(name, t.accepted, t.flagged, t.rejected, t.rules);
  }

  private other(eventName: string): QualityTally {
    let t = this.others.get(eventName);
    if (t === undefined) this.others.set(eventName, (t = newTally()));
    return t;
  }
}
