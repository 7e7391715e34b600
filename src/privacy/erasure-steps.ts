import { Injectable } from '@nestjs/common';
import { PartitionsService } from '@app/storage/partitions.service';
import { RollupsService } from '@app/rollups/rollups.service';
import { QuarantineService } from '@app/plans/quarantine.service';
import { DeletionRepository, type DeletionKind } from './deletion.repository';
import { EventErasureRepository } from './event-erasure.repository';

/** What an erasure step works on. `userIds` are in their stored form. */
export interface ErasureTarget {
  deletionId: string;
  appId: string;
  userIds: string[];
  /** True once the process is shutting down: a step may stop early, it is run again on resume. */
  stopping(): boolean;
  /** Called after each piece of work with its duration: pauses to leave the machine to ingest. */
  pace(workMs: number): Promise<void>;
}

/**
 * One store the erasure must reach. The job runs the steps in order and records each one that
 * finished in the deletion's `steps_done`; after a crash it runs the unfinished ones again, so a
 * step must be idempotent (running it twice changes nothing), and must record its own counts in
 * the same transaction as its deletes.
 */
export interface ErasureStep {
  /** Stable: stored in `deletions.steps_done`. */
  readonly name: string;
  /** Returns false when it stopped early (shutdown); the job then resumes later. */
  run(target: ErasureTarget): Promise<boolean>;
}

/** How a piece of an erasure ended: the last of its kind, one of more to come, or not run (stopping). */
type Piece = 'last' | 'more' | 'stopped';

/**
 * Runs one piece of work unless the process is stopping, then pauses in proportion to its
 * duration, to leave the machine to ingest; a piece that says it was the last earns no pause.
 */
async function pacedPiece(target: ErasureTarget, work: () => Promise<'last' | 'more'>): Promise<Piece> {
  if (target.stopping()) return 'stopped';
  const started = Date.now();
  const piece = await work();
  if (piece === 'more') await target.pace(Date.now() - started);
  return piece;
}

/** Events deleted per statement: short transactions, and a crash loses at most one batch's work. */
export const EVENT_BATCH = 5_000;

/** How one partition's events of the target are deleted in batches, and whether any is left. */
interface PartitionEraser {
  deleteBatch(partition: string, target: ErasureTarget): Promise<number>;
  anyLeft(partition: string, target: ErasureTarget): Promise<boolean>;
}

/** Deletes the target's events from every daily partition, batch by batch, paced. */
async function eraseEveryPartition(
  partitions: PartitionsService,
  eraser: PartitionEraser,
  target: ErasureTarget,
): Promise<boolean> {
  // Newest first: the days ingest writes, whose rows a read is likeliest to show.
  for (const { name } of (await partitions.list()).reverse()) {
    let piece: Piece;
    do {
      piece = await pacedPiece(target, async () => {
        const n = await eraser.deleteBatch(name, target);
        // A short batch does not prove the partition done: after a crash, the dead process's last
        // statement may still be running and take rows this one waited for. Only a look that
        // finds none left ends the partition.
        const done = n < EVENT_BATCH && !(await eraser.anyLeft(name, target));
        return done ? 'last' : 'more';
      });
      if (piece === 'stopped') return false;
    } while (piece === 'more');
  }
  return true;
}

/** The users' events, from every daily partition. */
@Injectable()
export class EventsErasureStep implements ErasureStep {
  readonly name = 'events';

  constructor(
    private readonly partitions: PartitionsService,
    private readonly events: EventErasureRepository,
  ) {}

  run(target: ErasureTarget): Promise<boolean> {
    return eraseEveryPartition(
      this.partitions,
      {
        deleteBatch: (p, t) => this.events.deleteBatch(p, t.deletionId, t.appId, t.userIds, EVENT_BATCH),
        anyLeft: (p, t) => this.events.anyLeft(p, t.appId, t.userIds),
      },
      target,
    );
  }
}

/** Every event of an app (its deletion), from every daily partition. */
@Injectable()
export class AppEventsErasureStep implements ErasureStep {
  readonly name = 'app-events';

  constructor(
    private readonly partitions: PartitionsService,
    private readonly events: EventErasureRepository,
  ) {}

  run(target: ErasureTarget): Promise<boolean> {
    return eraseEveryPartition(
      this.partitions,
      {
        deleteBatch: (p, t) => this.events.deleteAppBatch(p, t.deletionId, t.appId, EVENT_BATCH),
        anyLeft: (p, t) => this.events.anyOfAppLeft(p, t.appId),
      },
      target,
    );
  }
}

/**
 * The rest of an app, once its events are gone: every other table that holds its rows (found in
 * the catalog, so that a table added later is reached too), then its keys, its user deletions'
 * records and the app itself. No rollup computation runs meanwhile, so none writes the app's
 * rows again. Each statement is idempotent: a rerun after a crash finds less or nothing.
 */
@Injectable()
export class AppRowsErasureStep implements ErasureStep {
  readonly name = 'app-rows';

  constructor(
    private readonly deletions: DeletionRepository,
    private readonly rollups: RollupsService,
  ) {}

  async run(target: ErasureTarget): Promise<boolean> {
    if (target.stopping()) return false;
    await this.rollups.exclusive(async (manager) => {
      for (const table of await this.deletions.appTables(manager)) {
        await this.deletions.deleteAppRows(table, target.appId, manager);
      }
    });
    await this.deletions.deleteAppRecord(target.appId, target.deletionId);
    return true;
  }
}

/**
 * The users' events that a tracking plan rejected into the quarantine. It keeps at most
 * QUARANTINE_DAYS of events, so one statement takes them all; running it again deletes nothing.
 */
@Injectable()
export class QuarantineErasureStep implements ErasureStep {
  readonly name = 'quarantine';

  constructor(private readonly quarantine: QuarantineService) {}

  async run(target: ErasureTarget): Promise<boolean> {
    if (target.stopping()) return false;
    await this.quarantine.deleteUsers(target.appId, target.userIds);
    return true;
  }
}

/**
 * The rollups of every day the deleted events touched, `final` days included, through the rollup
 * computation (one computation at a time; rows left without events are dropped).
 */
@Injectable()
export class RollupsErasureStep implements ErasureStep {
  readonly name = 'rollups';

  constructor(
    private readonly deletions: DeletionRepository,
    private readonly rollups: RollupsService,
  ) {}

  async run(target: ErasureTarget): Promise<boolean> {
    const row = await this.deletions.find(target.deletionId);
    const days = row?.days ?? [];
    // Kept sets of users (insights) outlive the events: the users leave every day of them first.
    if (target.stopping()) return false;
    await this.rollups.forgetUsers(target.appId, target.userIds);
    // A day at a time, so that a shutdown waits for one day at most; a resume recomputes them all.
    for (const day of days) {
      const piece = await pacedPiece(target, async () => {
        await this.rollups.recomputeAfterRemoval(target.appId, [day]);
        return 'more';
      });
      if (piece === 'stopped') return false;
    }
    await this.deletions.setDaysRecomputed(target.deletionId, days.length);
    return true;
  }
}

/** The ordered erasure steps of each kind of deletion (src/privacy/privacy.module.ts builds them). */
export const ERASURE_STEPS = Symbol('ERASURE_STEPS');

/** The steps of a deletion, by its kind. */
export type ErasureSteps = Record<DeletionKind, ErasureStep[]>;
