import { CursorSecretRepository } from '@app/common/reads/cursor-secret.repository';
import type { DataSource } from 'typeorm';
import type { AppsService } from '@app/auth/apps.service';
import type { AuditService } from '@app/audit/audit.service';
import { UserSuppressions } from '@app/common/suppressions/user-suppressions';
import type { RollupsService } from '@app/rollups/rollups.service';
import { PartitionRepository } from '@app/storage/partition.repository';
import { DeletionRepository } from './deletion.repository';
import { DeletionJob, deletionEnded } from './deletion-job';
import { DeletionsService, DeletionView, deletionView } from './deletions.service';
import { EventsErasureStep, QuarantineErasureStep, RollupsErasureStep } from './erasure-steps';
import { QuarantineRepository } from '@app/plans/quarantine.repository';
import { EventErasureRepository } from './event-erasure.repository';
import { ErasureLedger } from './erasure-ledger';
import { ErasureLedgerReplayer, LedgerReplay } from './erasure-ledger-replay';
import { SuppressionRepository } from './suppression.repository';
import { SuppressionsService } from './suppressions.service';

/** How often `--wait` looks at a deletion that another process is running. */
const WAIT_POLL_MS = 200;

/** The privacy services of the admin CLI, built by hand on its DataSource. */
export interface CliPrivacy {
  deletions: DeletionsService;
  suppressions: SuppressionsService;
  /** Runs the deletion here until it ends (or waits for the process that runs it); returns it ended. */
  runToEnd(id: string): Promise<DeletionView>;
  /** Applies again each deletion of the erasure ledger that the database lacks (after a restore). */
  replayLedger(): Promise<LedgerReplay>;
}

export function buildCliPrivacy(
  db: DataSource,
  apps: AppsService,
  audit: AuditService,
  rollups: RollupsService,
  pausePercent: number,
  ledgerPath: string,
): CliPrivacy {
  const deletionRepo = new DeletionRepository(db);
  const suppressions = new SuppressionsService(
    new SuppressionRepository(db),
    apps,
    new UserSuppressions(),
    audit,
  );
  const deletions = new DeletionsService(
    deletionRepo,
    suppressions,
    apps,
    audit,
    new CursorSecretRepository(db),
  );
  const steps = [
    new EventsErasureStep(new PartitionRepository(db), new EventErasureRepository(db)),
    new QuarantineErasureStep(new QuarantineRepository(db)),
    new RollupsErasureStep(deletionRepo, rollups),
  ];
  const ledger = new ErasureLedger(ledgerPath);
  const job = new DeletionJob(deletionRepo, steps, {
    ended: deletionEnded(audit),
    beforeDone: (row) => ledger.record(row),
    pausePercent,
  });
  const runToEnd = async (id: string): Promise<DeletionView> => {
    for (;;) {
      const outcome = await job.run(id);
      const row = await deletionRepo.find(id);
      if (!row) throw new Error(`deletion ${id} vanished`);
      if (row.status === 'done' || row.status === 'failed') return deletionView(row);
      // Not due yet (suppression settling), run elsewhere, or an attempt failed: look again shortly.
      const wait = outcome === 'not_ready' ? Math.max(0, row.notBefore - Date.now()) + 10 : WAIT_POLL_MS;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  };
  const replayer = new ErasureLedgerReplayer(ledger, deletionRepo, suppressions, apps, audit, job);
  return { deletions, suppressions, runToEnd, replayLedger: () => replayer.replay() };
}
