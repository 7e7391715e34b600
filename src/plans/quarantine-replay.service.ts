import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { AppsService } from '@app/auth/apps.service';
import { DEFAULT_TIME_ZONE } from '@app/common/timezones';
import type { CursorPosition } from '@app/common/reads/cursor';
import type { AcceptedEvent } from '@app/ingest/ingest.types';
import { acceptedEvent, ReplayWriter } from '@app/ingest/replay-writer';
import type { CompiledPlan } from './compiled-plan';
import { PlansService } from './plans.service';
import { QuarantineService } from './quarantine.service';
import type { QuarantineFilters, ReplayRow } from './quarantine.types';

export type ReplayActor = Parameters<PlansService['recordReplay']>[1];

export interface ReplayResult {
  replayed: number;
  duplicates: number;
  stillRejected: number;
}

/**
 * Quarantined events per transaction, and how many chunk transactions run at once. While one
 * chunk is checked and encoded here, another is written by the database, so the two halves of
 * the work overlap; the chunks are sized so that what each one holds (parsed rows, encoded
 * columns) stays small for the garbage collector. Measured with `npm run bench -- --plans`.
 */
export const REPLAY_CHUNK = 2000;
export const REPLAY_PARALLEL = 2;

/** Where the next chunk starts: after a position, from the start (null), or nowhere (the end). */
type NextChunk = CursorPosition | null | 'end';

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
    private readonly plans: PlansService,
    private readonly quarantine: QuarantineService,
    private readonly writer: ReplayWriter,
    private readonly apps: AppsService,
  ) {}

  /** Replays, then records `quarantine.replayed` with the filters and the counts. */
  async replay(appId: string, filters: QuarantineFilters, actor: ReplayActor): Promise<ReplayResult> {
    // Only the plan's own rejections can pass a plan now; the field-rule rejections the SDK
    // formats keep (event_too_old, …) stay for inspection.
    const result = await this.replayChunks(appId, { ...filters, replayable: true });
    await this.plans.recordReplay(appId, actor, {
      ...result,
      eventName: filters.eventName ?? null,
      code: filters.code ?? null,
    });
    return result;
  }

  /**
   * Runs up to `parallel` chunk transactions at once. Chunks are opened one after the other:
   * each starts after the last row the previous one locked, which is known as soon as its rows
   * are read, so a row is looked at once per replay whatever its verdict.
   */
  async replayChunks(
    appId: string,
    filters: QuarantineFilters,
    chunk = REPLAY_CHUNK,
    parallel = REPLAY_PARALLEL,
  ): Promise<ReplayResult> {
    // The plan in force now: what ingest would apply to these events if they arrived today.
    const plan = await this.plans.current(appId);
    // The app's zone names the local days whose rollups the replayed events change, as ingest's do.
    const timezone = (await this.apps.timezoneOf(appId)) ?? DEFAULT_TIME_ZONE;
    const total: ReplayResult = { replayed: 0, duplicates: 0, stillRejected: 0 };
    let next: Promise<NextChunk> = Promise.resolve(null);
    const worker = async (): Promise<void> => {
      for (;;) {
        const turn = next;
        let pass!: (position: NextChunk) => void;
        next = new Promise((resolve) => (pass = resolve));
        const after = await turn;
        if (after === 'end') return pass('end');
        const claimed = (rows: ReplayRow[]) => {
          const last = rows[rows.length - 1];
          pass(rows.length < chunk ? 'end' : { receivedUs: BigInt(last.receivedUs), id: BigInt(last.id) });
        };
        let result: ReplayResult;
        try {
          result = await this.quarantine.replayChunk(appId, filters, after, chunk, claimed, (rows, manager) =>
            this.replayChunk(appId, timezone, plan, rows, manager),
          );
        } catch (err) {
          // The other workers stop after their chunk in flight; those already committed stay so.
          pass('end');
          next = Promise.resolve('end');
          throw err;
        }
        total.replayed += result.replayed;
        total.duplicates += result.duplicates;
        total.stillRejected += result.stillRejected;
      }
    };
    const runs = await Promise.allSettled(Array.from({ length: Math.max(1, parallel) }, worker));
    const failed = runs.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    return total;
  }

  private async replayChunk(
    appId: string,
    timezone: string,
    plan: CompiledPlan | null,
    rows: ReplayRow[],
    manager: EntityManager,
  ) {
    const result: ReplayResult = { replayed: 0, duplicates: 0, stillRejected: 0 };
    const remove: string[] = [];
    const events: AcceptedEvent[] = [];
    const ids = new Set<string>();
    // The day's event-name bound, as ingest applies it: an event whose name the day has no room
    // for stays in the quarantine.
    const now = Date.now();
    const names = await this.writer.names(
      appId,
      rows.map((r) => r.ts),
      now,
    );
    for (const row of rows) {
      const violations = plan?.check(row) ?? null;
      if ((violations !== null && plan!.rejects(violations)) || !names.admit(row.eventName, row.ts)) {
        result.stillRejected++;
        continue;
      }
      remove.push(row.id);
      if (row.eventId !== null) {
        // A repeat within the chunk: the first copy wins, as within an ingest batch.
        if (ids.has(row.eventId)) {
          result.duplicates++;
          continue;
        }
        ids.add(row.eventId);
      }
      events.push(acceptedEvent(row, events.length));
    }
    if (events.length) {
      // Replayed events are received now: an export window already read never gains an event.
      const batch = { appId, receivedAt: Date.now(), events, timezone };
      const repeated = await this.writer.write(manager, batch);
      result.duplicates += repeated.length;
      result.replayed += events.length - repeated.length;
    }
    return { remove, result };
  }
}
