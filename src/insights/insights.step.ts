import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import type { LocalDayTarget } from '@app/rollups/rollup-computation.repository';
import { RollupDayStep, RollupSteps } from '@app/rollups/rollup-steps';
import { type InsightDay, InsightComputationRepository } from './insight-computation.repository';
import { encodeLists, InsightDayRepository } from './insight-day.repository';
import { type DaySource, InsightDaySourceRepository } from './insight-day-source.repository';
import { type BreakdownKey, canAddToDay } from './day-increment';
import { unionMembers } from './member-lists';
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
    private readonly sources: InsightDaySourceRepository,
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
    const source = await this.sources.source(runner, appId, day, declared, maxValues);
    if (source.same) {
      await this.days.keepDay(runner, appId, day);
      this.metrics.day('kept');
      return;
    }
    await this.computation.prepare(runner);
    // A day that only gained events (late ones, the open day's latest) takes those alone.
    if (source.grown && (await this.addEvents(runner, appId, day, declared, maxValues, source))) {
      this.metrics.day('added');
      return;
    }
    const rows = await this.days.load(runner, appId, day, declared, maxValues);
    await this.days.writeDayUsers(runner, appId, day, rows.users);
    await this.days.writeBreakdowns(runner, appId, day, rows.breakdowns);
    await this.sources.writeSource(runner, appId, day, source, rows.parts);
    this.metrics.day('computed');
  }

  /**
   * Adds the events the day gained since its rows were computed to its rows, when that gives
   * what computing the whole day would (day-increment.ts); false when it does not, with nothing
   * written but the new ids' numbers, which the whole day's computation would give them as well.
   */
  private async addEvents(
    runner: QueryRunner,
    appId: string,
    day: InsightDay,
    declared: readonly string[],
    maxValues: number,
    source: DaySource,
  ): Promise<boolean> {
    const rows = await this.days.loadAfter(runner, appId, day, declared, source.maxId, source.newEvents);
    const stored = await this.days.storedKeys(runner, appId, day);
    const addedNames = source.names.filter((name) => !source.storedNames.includes(name));
    if (!canAddToDay(stored, rows.breakdowns, addedNames, maxValues)) return false;
    const lists = new Map(
      (await this.days.storedLists(runner, appId, day, rows.breakdowns)).map((row) => [keyOf(row), row]),
    );
    const breakdowns = rows.breakdowns.map((row) => {
      const added = encodeLists(row);
      const old = lists.get(keyOf(row));
      if (!old) return added;
      return {
        ...added,
        users: unionMembers(old.users, added.users),
        sessions: unionMembers(old.sessions, added.sessions),
      };
    });
    await this.days.addDayUsers(runner, appId, day, rows.users);
    await this.days.addBreakdowns(runner, appId, day, breakdowns);
    await this.days.keepDay(runner, appId, day);
    await this.sources.addSource(runner, appId, day, source.names, rows.parts);
    return true;
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

/** A breakdown row's key as one string. */
function keyOf(row: BreakdownKey): string {
  return `${row.dimension}\u0000${row.m}\u0000${row.kind}\u0000${row.value}`;
}
