import { Inject, Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { APP_CONFIG, AppConfig } from '@app/config/config';
import type { CursorPosition } from '@app/common/reads/cursor';
import type { CompiledPlan } from '@app/plans/compiled-plan';
import { PlansService } from '@app/plans/plans.service';
import { QuarantineRepository } from '@app/plans/quarantine.repository';
import type { QuarantineFilters, QuarantineRow } from '@app/plans/quarantine.types';
import { commitWithinMs, dedupWindowMs } from './ingest.limits';
import { IngestRepository } from './ingest.repository';
import type { AcceptedEvent } from './ingest.types';

export type ReplayActor = Parameters<PlansService['recordReplay']>[1];

export interface ReplayResult {
  replayed: number;
  duplicates: number;
  stillRejected: number;
}

/**
 * Quarantined events per transaction. Larger chunks share the per-statement and per-commit costs:
 * 10,000 events replayed in about 0.6 s with 1,000 per chunk and 0.4 s with 5,000 (test database,
 * lightly loaded 2-core machine).
 */
export const REPLAY_CHUNK = 5000;

function toEvent(row: QuarantineRow, index: number): AcceptedEvent {
  return {
    index,
    eventId: row.eventId,
    eventName: row.eventName,
    anonymousUserId: row.anonymousUserId,
    sessionId: row.sessionId,
    eventTime: row.eventTime,
    ts: row.ts,
    isTestMode: row.isTestMode,
    platform: row.platform,
    appVersion: row.appVersion,
    buildNumber: row.buildNumber,
    osVersion: row.osVersion,
    deviceModel: row.deviceModel,
    locale: row.locale,
    timezone: row.timezone,
    floatValue: row.floatValue,
    payload: row.payload,
  };
}

/**
 * Replays the quarantine against the current plan. Chunk by chunk, oldest first, each in one
 * transaction: the chunk's rows are locked (a concurrent replay skips them), those that now pass
 * are written exactly as ingest writes (the dedup claim applies, so an event already stored
 * counts as a duplicate) and deleted from the quarantine, and the transaction commits. A crash
 * loses at most the chunk in flight, which stays quarantined; running the replay again resumes.
 */
@Injectable()
export class QuarantineReplayService {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly plans: PlansService,
    private readonly quarantine: QuarantineRepository,
    private readonly events: IngestRepository,
  ) {}

  /** Replays, then records `quarantine.replayed` with the filters and the counts. */
  async replay(appId: string, filters: QuarantineFilters, actor: ReplayActor): Promise<ReplayResult> {
    const result = await this.replayChunks(appId, filters);
    await this.plans.recordReplay(appId, actor, {
      ...result,
      eventName: filters.eventName ?? null,
      code: filters.code ?? null,
    });
    return result;
  }

  async replayChunks(appId: string, filters: QuarantineFilters, chunk = REPLAY_CHUNK): Promise<ReplayResult> {
    // The plan in force now: what ingest would apply to these events if they arrived today.
    const plan = await this.plans.current(appId);
    const total: ReplayResult = { replayed: 0, duplicates: 0, stillRejected: 0 };
    let after: CursorPosition | null = null;
    for (;;) {
      const step = (found: QuarantineRow[], manager: EntityManager) =>
        this.replayChunk(appId, plan, found, manager);
      const done: { rows: QuarantineRow[]; result: ReplayResult } = await this.quarantine.withChunk(
        appId,
        filters,
        after,
        chunk,
        step,
      );
      const { rows, result } = done;
      total.replayed += result.replayed;
      total.duplicates += result.duplicates;
      total.stillRejected += result.stillRejected;
      if (rows.length < chunk) return total;
      const last: QuarantineRow = rows[rows.length - 1];
      after = { receivedUs: last.receivedUs, id: BigInt(last.id) };
    }
  }

  private async replayChunk(
    appId: string,
    plan: CompiledPlan | null,
    rows: QuarantineRow[],
    manager: EntityManager,
  ) {
    const result: ReplayResult = { replayed: 0, duplicates: 0, stillRejected: 0 };
    const remove: QuarantineRow[] = [];
    const events: AcceptedEvent[] = [];
    const ids = new Set<string>();
    for (const row of rows) {
      const violations = plan?.check(row) ?? null;
      if (violations !== null && plan!.rejects(violations)) {
        result.stillRejected++;
        continue;
      }
      remove.push(row);
      if (row.eventId !== null) {
        // A repeat within the chunk: the first copy wins, as within an ingest batch.
        if (ids.has(row.eventId)) {
          result.duplicates++;
          continue;
        }
        ids.add(row.eventId);
      }
      events.push(toEvent(row, events.length));
    }
    if (events.length) {
      // Replayed events are received now: an export window already read never gains an event.
      const batch = { appId, receivedAt: Date.now(), events };
      const [repeated] = await this.events.insertBatchesIn(
        manager,
        [batch],
        dedupWindowMs(this.config),
        commitWithinMs(this.config),
      );
      result.duplicates += repeated.length;
      result.replayed += events.length - repeated.length;
    }
    return { remove, result };
  }
}
