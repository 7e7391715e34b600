import { Injectable } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';

/** One local day to compute: its instants [start, end) and where its rows go. */
export interface LocalDayTarget {
  day: string;
  zone: string;
  /** Epoch ms. */
  start: number;
  end: number;
  /** `rezone`: the new set of a zone change, built beside the served one (rollups_rezone). */
  set: 'served' | 'rezone';
}

/**
 * Data derived from an app's events day by day, kept in step with the rollups: another feature
 * registers one (insights does), and the rollup computation runs it in its own transactions, so
 * that ingest's dirty marks, finalisation, an erasure and a zone change reach it exactly as they
 * reach the rollups, with no second mechanism.
 */
export interface RollupDayStep {
  /**
   * Recomputes one local day, in the computation's transaction, after the day's rollup rows were
   * written to `target.set`. `replace` is false when the day has no events and must keep what it
   * holds (its partition may be gone past retention).
   */
  computeDay(runner: QueryRunner, appId: string, target: LocalDayTarget, replace: boolean): Promise<void>;
  /** A zone change's new set becomes the served one from `fromDay` on, in the swap's transaction. */
  swap(runner: QueryRunner, appId: string, fromDay: string): Promise<void>;
  /** A zone change (re)starts: the new set built so far is dropped, in its transaction. */
  restartRezone(
    runner: { query(sql: string, params?: unknown[]): Promise<unknown> },
    appId: string,
  ): Promise<void>;
  /**
   * Erasure: removes the users (stored ids) from every day kept, past event retention included,
   * with the computation lock held; idempotent.
   */
  forgetUsers(runner: QueryRunner, appId: string, userIds: string[]): Promise<void>;
  /**
   * After a computation has recomputed one day or more, with the computation lock still held
   * and no transaction open: upkeep of the step's own tables (insights compacts its id packs).
   * A failure is logged and the run's result stands.
   */
  afterDays?(runner: QueryRunner): Promise<void>;
}

/** The registered day steps, in registration order. */
@Injectable()
export class RollupSteps {
  private readonly steps: RollupDayStep[] = [];

  register(step: RollupDayStep): void {
    if (!this.steps.includes(step)) this.steps.push(step);
  }

  list(): readonly RollupDayStep[] {
    return this.steps;
  }
}
