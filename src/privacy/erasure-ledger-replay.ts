import { Logger } from '@nestjs/common';
import type { AppsService } from '@app/auth/apps.service';
import type { AuditService } from '@app/audit/audit.service';
import { AppError } from '@app/common/app-error';
import { UUID } from '@app/common/ids';
import type { DeletionRepository } from './deletion.repository';
import type { DeletionJob } from './deletion-job';
import type { ErasureLedger, LedgerEntry } from './erasure-ledger';
import type { SuppressionsService } from './suppressions.service';

/** How often the replay looks again at a deletion that another instance is running. */
const BUSY_POLL_MS = 200;

/** What one replay of the ledger did. */
export interface LedgerReplay {
  /** Entries in the ledger. */
  entries: number;
  /** Deletions the database lacked (or had not finished), run again to their end. */
  reapplied: string[];
  /** Entries naming an app the database does not have. */
  unknownApp: string[];
  /** Lines that were not entries (a torn last line, damage). */
  skippedLines: number;
}

/**
 * Brings the database up to the erasure ledger: each deletion the ledger holds that the database
 * lacks (a restored backup taken before it) is stored again with its users and suppression, and
 * run to its end by the same deletion job and erasure steps as any deletion. Entries the database
 * has as `done` cost one lookup, so running the replay again changes nothing.
 */
export class ErasureLedgerReplayer {
  private readonly logger = new Logger('ErasureLedger');

  constructor(
    private readonly ledger: ErasureLedger,
    private readonly deletions: DeletionRepository,
    private readonly suppressions: SuppressionsService,
    private readonly apps: AppsService,
    private readonly audit: AuditService,
    private readonly job: DeletionJob,
  ) {}

  async replay(): Promise<LedgerReplay> {
    const { entries, skippedLines } = await this.ledger.read();
    const result: LedgerReplay = { entries: entries.length, reapplied: [], unknownApp: [], skippedLines };
    for (const entry of entries) {
      const row = UUID.test(entry.deletionId) ? await this.deletions.find(entry.deletionId) : null;
      if (row?.status === 'done') continue;
      if (row?.status === 'failed') {
        this.logger.warn(`deletion ${entry.deletionId}: failed in this database, entry left for an operator`);
        continue;
      }
      if (!(await this.appExists(entry.appId))) {
        this.logger.warn(`deletion ${entry.deletionId}: app ${entry.appId} is unknown here, entry skipped`);
        result.unknownApp.push(entry.deletionId);
        continue;
      }
      if (!row) await this.store(entry);
      await this.runToEnd(entry.deletionId);
      result.reapplied.push(entry.deletionId);
      this.logger.log(`deletion ${entry.deletionId} re-applied from the erasure ledger`);
    }
    return result;
  }

  private async appExists(appId: string): Promise<boolean> {
    if (!UUID.test(appId)) return false;
    try {
      await this.apps.assertExist([appId]);
      return true;
    } catch (err) {
      if (err instanceof AppError && err.code === 'not_found') return false;
      throw err;
    }
  }

  /** Stores the deletion and its users' suppression in one transaction, as a request does. */
  private async store(entry: LedgerEntry): Promise<void> {
    await this.deletions.transaction(async (tx) => {
      const inserted = await this.deletions.insertFromLedger(tx, {
        id: entry.deletionId,
        appId: entry.appId,
        userIds: entry.users,
        suppress: entry.suppress,
        requestedBy: entry.requestedBy,
        notBefore: Date.now(),
      });
      if (!inserted) return;
      const details = { users: entry.users.length, suppress: entry.suppress, fromLedger: true };
      const actor = entry.requestedBy;
      const target = { actor, appId: entry.appId, targetId: entry.deletionId, details };
      await this.audit.record({ action: 'deletion.requested', ...target }, tx);
      if (entry.suppress) {
        const added = await this.suppressions.addStored(tx, entry.appId, entry.users);
        const suppressed = { users: added, deletionId: entry.deletionId, fromLedger: true };
        await this.audit.record(
          { action: 'suppression.added', actor, appId: entry.appId, details: suppressed },
          tx,
        );
      }
    });
  }

  private async runToEnd(id: string): Promise<void> {
    for (;;) {
      await this.job.run(id);
      const row = await this.deletions.find(id);
      if (!row || row.status === 'done' || row.status === 'failed') return;
      await new Promise((resolve) => setTimeout(resolve, BUSY_POLL_MS));
    }
  }
}
