import { Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { Interval } from '@nestjs/schedule';
import { utcDateString } from '@app/common/time';
import type { QualityTally } from './plan-gate';
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
  private quality = new Map<string, QualityRow>();
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

  /** Adds one request's tally. */
  add(appId: string, receivedAt: number, tally: Map<string, QualityTally>): void {
    const day = utcDateString(receivedAt);
    for (const [eventName, t] of tally) {
      const key = `${appId}|${day}|${eventName}`;
      let row = this.quality.get(key);
      if (!row)
        this.quality.set(key, (row = { appId, day, eventName, accepted: 0, flagged: 0, rejected: 0 }));
      row.accepted += t.accepted;
      row.flagged += t.flagged;
      row.rejected += t.rejected;
      for (const [fieldRule, n] of t.rules) {
        const ruleKey = `${key}|${fieldRule}`;
        let r = this.rules.get(ruleKey);
        if (!r) {
          const [field, rule] = fieldRule.split('\u0000');
          this.rules.set(ruleKey, (r = { appId, day, eventName, field, rule, violations: 0 }));
        }
        r.violations += n;
      }
    }
  }

  /** Writes the counts gathered so far. */
  async flush(): Promise<void> {
    const quality = [...this.quality.values()];
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
