import { CursorSecretRepository } from '@app/common/reads/cursor-secret.repository';
import type { DataSource } from 'typeorm';
import type { AppsService } from '@app/auth/apps.service';
import type { KeysService } from '@app/auth/keys.service';
import type { AuditService } from '@app/audit/audit.service';
import { UserSuppressions } from '@app/common/suppressions/user-suppressions';
import type { RollupsService } from '@app/rollups/rollups.service';
import { PartitionRepository } from '@app/storage/partition.repository';
import { DeletionRepository } from './deletion.repository';
import { DeletionJob, deletionEnded, userKeysOf } from './deletion-job';
import { DeletionsService, DeletionView, deletionView } from './deletions.service';
import {
  AppEventsErasureStep,
  AppRowsErasureStep,
  EventsErasureStep,
  QuarantineErasureStep,
  RollupsErasureStep,
  type ErasureSteps,
} from './erasure-steps';
import { QuarantineRepository } from '@app/plans/quarantine.repository';
import { EventErasureRepository } from './event-erasure.repository';
import { ErasureLedger, ledgerEntry } from './erasure-ledger';
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
  keys: KeysService,
  audit: AuditService,
  rollups: RollupsService,
  pausePercent: number,
  ledgerPath: string,
): CliPrivacy {
  const deletionRepo = new DeletionRepository(db);
  const secrets = new CursorSecretRepository(db);
  const suppressions = new SuppressionsService(
    new SuppressionRepository(db),
    apps,
    new UserSuppressions(),
    audit,
  );
  const deletions = new DeletionsService(deletionRepo, suppressions, apps, audit, secrets, keys);
  const partitions = new PartitionRepository(db);
  const eventRows = new EventErasureRepository(db);
  const steps: ErasureSteps = {
    users: [
      new EventsErasureStep(partitions, eventRows),
      new QuarantineErasureStep(new QuarantineRepository(db)),
      new RollupsErasureStep(deletionRepo, rollups),
    ],
    app: [new AppEventsErasureStep(partitions, eventRows), new AppRowsErasureStep(deletionRepo, rollups)],
  };
  const ledger = new ErasureLedger(ledgerPath);
  const job = new DeletionJob(deletionRepo, steps, {
    ended: deletionEnded(audit),
    beforeDone: ledgerEntry(ledger, suppressions),
    pausePercent,
    userKeys: userKeysOf(secrets),
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
  const replayer = new ErasureLedgerReplayer(ledger, deletionRepo, suppressions, apps, audit, job, keys);
  return { deletions, suppressions, runToEnd, replayLedger: () => replayer.replay() };
}
