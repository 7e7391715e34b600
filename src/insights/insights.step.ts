import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import type { LocalDayTarget } from '@app/rollups/rollup-computation.repository';
import { RollupDayStep, RollupSteps } from '@app/rollups/rollup-steps';
import { InsightComputationRepository } from './insight-computation.repository';
import { type BreakdownDayRow, type DayUsersRow, InsightDayRepository } from './insight-day.repository';
import { InsightsMetrics } from './insights.metrics';

/**
 * Insights as a step of the rollup computation: each local day the rollups recompute (dirty
 * marks, finalisation, an erasure, a zone change, `tally rollups compute`) gets its user sets and
 * breakdown rows recomputed in the same transaction, and an erasure clears its users from every
 * kept day. Ingest is untouched.
 */
@Injectable()
export class InsightsStep implements RollupDayStep, OnModuleInit {
  private readonly logger = new Logger(InsightsStep.name);

  constructor(
    private readonly computation: InsightComputationRepository,
    private readonly days: InsightDayRepository,
    private readonly steps: RollupSteps,
    private readonly metrics: InsightsMetrics,
    @Inject(APP_CONFIG)
    private readonly config: ConfigSlice<'breakdownMaxValues' | 'insightIdsCompactPercent'>,
  ) {}

  onModuleInit(): void {
    this.steps.register(this);
  }

  async computeDay(
    runner: QueryRunner,
    appId: string,
    target: LocalDayTarget,
    replace: boolean,
  ): Promise<void> {
    if (!replace) return;
    const day = {
      day: target.day,
      zone: target.zone,
      start: target.start,
      end: target.end,
      rezone: target.set === 'rezone',
    };
    const declared = await this.computation.declaredDimensions(runner, appId);
    const maxValues = this.config.breakdownMaxValues;
    // A day computed from the same inputs keeps its rows: reading and numbering its events again
    // would write the same rows (finalisation of a day with no late event, a rerun).
    const { source, same } = await this.days.source(runner, appId, day, declared, maxValues);
    if (same) {
      await this.days.keepDay(runner, appId, day);
      this.metrics.day('kept');
      return;
    }
    await this.computation.prepare(runner);
    const rows = await this.days.load(runner, appId, day, declared, maxValues);
    const users = rows.filter((r): r is DayUsersRow => r.set === 'u');
    const breakdowns = rows.filter((r): r is BreakdownDayRow => r.set === 'b');
    await this.days.writeDayUsers(runner, appId, day, users);
    await this.days.writeBreakdowns(runner, appId, day, breakdowns);
    await this.days.writeSource(runner, appId, day, source);
    this.metrics.day('computed');
  }

  swap(runner: QueryRunner, appId: string, fromDay: string): Promise<void> {
    return this.computation.swap(runner, appId, fromDay);
  }

  restartRezone(
    runner: { query(sql: string, params?: unknown[]): Promise<unknown> },
    appId: string,
  ): Promise<void> {
    return this.computation.dropRezone(runner, appId);
  }

  forgetUsers(runner: QueryRunner, appId: string, userIds: string[]): Promise<void> {
    return this.computation.forgetUsers(runner, appId, userIds);
  }

  /** Gives back the space the id packs' growth left behind, past INSIGHT_IDS_COMPACT_PERCENT. */
  async afterDays(runner: QueryRunner): Promise<void> {
    const sizes = await this.computation.compactIdPacks(runner, this.config.insightIdsCompactPercent);
    if (sizes) {
      const mb = (bytes: number) => (bytes / 1_048_576).toFixed(1);
      this.logger.log(`compacted the insight id packs from ${mb(sizes.before)} MB to ${mb(sizes.after)} MB`);
    }
  }
}
