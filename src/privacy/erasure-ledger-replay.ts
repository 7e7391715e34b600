import { Logger } from '@nestjs/common';
import type { AppsService } from '@app/auth/apps.service';
import type { KeysService } from '@app/auth/keys.service';
import type { AuditService } from '@app/audit/audit.service';
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
    private readonly keys: Pick<KeysService, 'detachApp'>,
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

  /** Whether the database has the app, one being deleted included. */
  private async appExists(appId: string): Promise<boolean> {
    return UUID.test(appId) && (await this.apps.timezoneOf(appId)) !== null;
  }

  /** The stored ids, in this database, of the users the entry names by pseudonym. */
  private async usersOf(entry: LedgerEntry): Promise<string[]> {
    if (entry.userHashes.length === 0) return [];
    const wanted = new Set(entry.userHashes);
    const stored = await this.deletions.storedUsersOf(entry.appId);
    const hashes = await this.suppressions.hashesOf(entry.appId, stored);
    return stored.filter((_, i) => wanted.has(hashes[i]));
  }

  /**
   * Stores the deletion and its users' suppression in one transaction, as a request does; an
   * app's deletion also marks the app and takes it from its keys, as `tally apps delete` does.
   */
  private async store(entry: LedgerEntry): Promise<void> {
    const userIds = await this.usersOf(entry);
    await this.deletions.transaction(async (tx) => {
      const inserted = await this.deletions.insertFromLedger(tx, {
        id: entry.deletionId,
        appId: entry.appId,
        kind: entry.kind,
        userIds,
        userCount: entry.userHashes.length,
        suppress: entry.suppress,
        requestedBy: entry.requestedBy,
        notBefore: Date.now(),
      });
      if (!inserted) return;
      if (entry.kind === 'app') {
        await this.apps.markDeleting(entry.appId, tx).catch(() => undefined);
        await this.keys.detachApp(entry.appId, tx);
      }
      const details = { users: entry.userHashes.length, suppress: entry.suppress, fromLedger: true };
      const actor = entry.requestedBy;
      const target = { actor, appId: entry.appId, targetId: entry.deletionId, details };
      await this.audit.record({ action: 'deletion.requested', ...target }, tx);
      if (entry.suppress && entry.userHashes.length) {
        const added = await this.suppressions.addHashes(tx, entry.appId, entry.userHashes);
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
