import { Logger } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { sqlState } from '@app/database/transient-error';
import type { AuditService } from '@app/audit/audit.service';
import { DeletionRepository, DeletionRow } from './deletion.repository';
import type { ErasureSteps } from './erasure-steps';
import { userKey } from '@app/common/user-keys';

/** Failed attempts before a deletion is given up as `failed` (a crash or a shutdown is not one). */
export const MAX_ATTEMPTS = 10;

export type RunOutcome = 'done' | 'failed' | 'busy' | 'not_ready' | 'stopped' | 'retry' | 'ended';

export interface DeletionJobHooks {
  /** Called in the transaction that ends the deletion (the audit entry commits with it). */
  ended?(tx: EntityManager, row: DeletionRow): Promise<void>;
  metrics?: { ended(status: 'done' | 'failed', seconds: number): void };
  /**
   * Called before a deletion is ended `done`, with its user ids still known: the erasure ledger
   * appends and fsyncs it here, so no deletion is `done` that the ledger lacks.
   */
  beforeDone?(row: DeletionRow): Promise<void>;
  /** ERASURE_PAUSE_PERCENT: the pause after each piece of work, in percent of its time. */
  pausePercent?: number;
  /** The users' keys outside Tally (common/user-keys.ts), kept with a finished deletion. */
  userKeys?(appId: string, userIds: string[]): Promise<string[]>;
}

/** The `userKeys` hook on the server's secret (CursorSecretRepository.userKeySecret). */
export function userKeysOf(secrets: {
  userKeySecret(): Promise<Buffer>;
}): NonNullable<DeletionJobHooks['userKeys']> {
  return async (appId, userIds) => {
    const secret = await secrets.userKeySecret();
    return userIds.map((id) => userKey(secret, appId, id));
  };
}

/** The audit entry of a deletion's end, under the actor who requested it. */
export function deletionEnded(audit: AuditService): NonNullable<DeletionJobHooks['ended']> {
  return (tx, row) =>
    audit.record(
      {
        action: 'deletion.finished',
        actor: row.requestedBy,
        appId: row.appId,
        targetId: row.id,
        details: {
          status: row.status,
          users: row.userCount,
          eventsDeleted: row.eventsDeleted,
          daysRecomputed: row.daysRecomputed,
        },
      },
      tx,
    );
}

/**
 * Runs one deletion to its end: under the deletion's advisory lock, each erasure step not done
 * yet, then the end, which forgets the user ids. Safe to run on any instance, any number of
 * times, after a crash at any point. Log lines name the deletion, never a user id.
 */
export class DeletionJob {
  private readonly logger = new Logger('Deletions');

  constructor(
    private readonly deletions: DeletionRepository,
    private readonly steps: ErasureSteps,
    private readonly hooks: DeletionJobHooks = {},
    private readonly stopping: () => boolean = () => false,
  ) {}

  async run(id: string, now = Date.now()): Promise<RunOutcome> {
    let outcome: RunOutcome = 'busy';
    const locked = await this.deletions.withDeletionLock(id, async () => {
      outcome = await this.runLocked(id, now);
    });
    return locked ? outcome : 'busy';
  }

  private async runLocked(id: string, now: number): Promise<RunOutcome> {
    const row = await this.deletions.find(id);
    if (!row || row.status === 'done' || row.status === 'failed') return 'ended';
    // Suppression must be in force on every instance before the events go.
    if (row.notBefore > now) return 'not_ready';
    if (row.attempts >= MAX_ATTEMPTS) return this.end(row, 'failed', 'gave up after repeated failures');
    await this.deletions.markRunning(id);
    const pausePercent = this.hooks.pausePercent ?? 0;
    const target = {
      deletionId: id,
      appId: row.appId,
      userIds: row.userIds ?? [],
      stopping: this.stopping,
      pace: (workMs: number) =>
        pausePercent > 0 && !this.stopping()
          ? new Promise<void>((resolve) => setTimeout(resolve, (workMs * pausePercent) / 100))
          : Promise.resolve(),
    };
    try {
      for (const step of this.steps[row.kind]) {
        if (row.stepsDone.includes(step.name)) continue;
        const started = Date.now();
        if (!(await step.run(target))) return 'stopped';
        await this.deletions.markStepDone(id, step.name);
        this.logger.log(`deletion ${id}: step ${step.name} done in ${Date.now() - started} ms`);
      }
    } catch (err) {
      // The SQLSTATE, not the message: a message may quote a row's values.
      const code = sqlState(err) ?? (err as Error).name;
      await this.deletions.countFailure(id).catch(() => undefined);
      this.logger.warn(`deletion ${id}: attempt ${row.attempts + 1} failed (${code}); it will be retried`);
      return 'retry';
    }
    return this.end(row, 'done', null);
  }

  private async end(row: DeletionRow, status: 'done' | 'failed', error: string | null): Promise<RunOutcome> {
    // The users' keys, for the copies outside Tally; an app's deletion names no users.
    const keys =
      status === 'done' && row.kind === 'users' && this.hooks.userKeys
        ? await this.hooks.userKeys(row.appId, row.userIds ?? [])
        : null;
    if (status === 'done') await this.hooks.beforeDone?.(row);
    const ended = await this.deletions.transaction(async (tx) => {
      const finished = await this.deletions.finish(tx, row.id, status, error, keys);
      await this.hooks.ended?.(tx, finished);
      return finished;
    });
    const seconds = ((ended.finishedAt ?? Date.now()) - ended.createdAt) / 1000;
    this.hooks.metrics?.ended(status, seconds);
    this.logger.log(
      `deletion ${row.id} ${status}: ${ended.eventsDeleted} events deleted, ${ended.daysRecomputed} days recomputed`,
    );
    return status;
  }
}
