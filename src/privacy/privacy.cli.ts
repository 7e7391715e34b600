import { Injectable, Module } from '@nestjs/common';
import { AuthCoreModule } from '@app/auth/auth-core.module';
import { ReadsModule } from '@app/common/reads/reads.module';
import type { DeletionJob } from './deletion-job';
import { DeletionRunner } from './deletion-runner';
import { DeletionsService, DeletionView, deletionView } from './deletions.service';
import type { ErasureLedgerReplayer, LedgerReplay } from './erasure-ledger-replay';
import { PrivacyCoreModule } from './privacy-core.module';
import { SuppressionsService } from './suppressions.service';

/** How often `--wait` looks at a deletion that another process is running. */
const WAIT_POLL_MS = 200;

/**
 * What the admin CLI's privacy commands call: the deletions and suppressions of the service, and
 * a deletion job of its own over the same erasure steps, for `--wait` and the ledger's replay.
 */
@Injectable()
export class CliPrivacy {
  private readonly job: DeletionJob;
  private readonly replayer: ErasureLedgerReplayer;

  constructor(
    readonly deletions: DeletionsService,
    readonly suppressions: SuppressionsService,
    private readonly deletionRows: DeletionRunner,
  ) {
    const work = deletionRows.open();
    this.job = work.job;
    this.replayer = work.ledger;
  }

  /** Runs the deletion here until it ends (or waits for the process that runs it); returns it ended. */
  async runToEnd(id: string): Promise<DeletionView> {
    for (;;) {
      const outcome = await this.job.run(id);
      const row = await this.deletionRows.find(id);
      if (!row) throw new Error(`deletion ${id} vanished`);
      if (row.status === 'done' || row.status === 'failed') return deletionView(row);
      // Not due yet (suppression settling), run elsewhere, or an attempt failed: look again shortly.
      const wait = outcome === 'not_ready' ? Math.max(0, row.notBefore - Date.now()) + 10 : WAIT_POLL_MS;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }

  /** Applies again each deletion of the erasure ledger that the database lacks (after a restore). */
  replayLedger(): Promise<LedgerReplay> {
    return this.replayer.replay();
  }
}

/** The privacy commands' module: the service's PrivacyCoreModule and CliPrivacy over it. */
@Module({
  imports: [PrivacyCoreModule, AuthCoreModule, ReadsModule],
  providers: [CliPrivacy],
  exports: [CliPrivacy],
})
export class PrivacyCliModule {}
