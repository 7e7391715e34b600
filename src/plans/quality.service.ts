import { Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { Interval } from '@nestjs/schedule';
import { utcDateString } from '@app/common/time';
import type { PlanGate } from './plan-gate';
import type { PlannedEvent } from './plan.types';
import { QualityRepository, QualityRow, RuleRow } from './quality.repository';

/** How often an instance adds its data-quality counts to the database. */
export const QUALITY_FLUSH_MS = 5_000;
const TOP_RULES = 5;

export interface EventQuality {
  eventName: string;
  accepted: number;
  flagged: number;
  rejected: number;
  topRules: { field: string; rule: string; count: number }[];
}

/**
 * The data-quality counts of tracking plans. Ingest adds each request's tally in memory (a few
 * map operations per event name); every QUALITY_FLUSH_MS the instance adds them to the daily rows
 * in one statement, and on shutdown. A crash loses at most the last interval's counts: these
 * figures guide the rollout of a plan, they are not billing.
 */
@Injectable()
export class QualityService implements OnApplicationShutdown {
  private readonly logger = new Logger('PlanQuality');
  /** Per `app|day`, the rows by event name. */
  private quality = new Map<string, Map<string, QualityRow>>();
  private rules = new Map<string, RuleRow>();

  constructor(private readonly repository: QualityRepository) {}

  @Interval('plan-quality-flush', QUALITY_FLUSH_MS)
  async scheduledFlush(): Promise<void> {
    await this.flush().catch((err: Error) =>
      this.logger.warn(`adding the data-quality counts failed: ${err.message}`),
    );
  }

  async onApplicationShutdown(): Promise<void> {
    await this.flush().catch(() => undefined);
  }

  /** Adds one request's counts (the plan gate's tally). */
  add(appId: string, receivedAt: number, gate: Pick<PlanGate<PlannedEvent>, 'forEachTally'>): void {
    const day = utcDateString(receivedAt);
    const bucket = `${appId}|${day}`;
    let quality = this.quality.get(bucket);
    if (quality === undefined) this.quality.set(bucket, (quality = new Map()));
    gate.forEachTally((eventName, accepted, flagged, rejected, rules) => {
      let row = quality.get(eventName);
      if (row === undefined)
        quality.set(eventName, (row = { appId, day, eventName, accepted: 0, flagged: 0, rejected: 0 }));
      row.accepted += accepted;
      row.flagged += flagged;
      row.rejected += rejected;
      if (rules !== null && rules.size > 0) this.addRules(appId, day, eventName, rules);
    });
  }

  private addRules(appId: string, day: string, eventName: string, rules: ReadonlyMap<string, number>): void {
    for (const [fieldRule, n] of rules) {
      const ruleKey = `${appId}|${day}|${eventName}|${fieldRule}`;
      let r = this.rules.get(ruleKey);
      if (!r) {
        const [field, rule] = fieldRule.split('\u0000');
        this.rules.set(ruleKey, (r = { appId, day, eventName, field, rule, violations: 0 }));
      }
      r.violations += n;
    }
  }

  /** Writes the counts gathered so far. */
  async flush(): Promise<void> {
    const quality = [...this.quality.values()].flatMap((rows) => [...rows.values()]);
    const rules = [...this.rules.values()];
    this.quality = new Map();
    this.rules = new Map();
    await this.repository.add(quality, rules);
  }

  /** Per event name over [fromDay, toDay]: accepted, flagged and rejected events and the top rules broken. */
  async summary(appId: string, fromDay: string, toDay: string): Promise<EventQuality[]> {
    // This instance's latest counts first, so that a reader sees its own traffic at once.
    await this.flush();
    const rows = await this.repository.summary(appId, fromDay, toDay, TOP_RULES);
    return rows.map((r) => ({
      eventName: r.event_name,
      accepted: Number(r.accepted),
      flagged: Number(r.flagged),
      rejected: Number(r.rejected),
      topRules: r.rules ?? [],
    }));
  }
}
