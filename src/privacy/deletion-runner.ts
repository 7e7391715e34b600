import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { AuditService } from '@app/audit/audit.service';
import { AppsService } from '@app/auth/apps.service';
import { KeysService } from '@app/auth/keys.service';
import { CursorSecretRepository } from '@app/common/reads/cursor-secret.repository';
import { DeletionRepository, type DeletionRow } from './deletion.repository';
import { DeletionJob, deletionEnded, userKeysOf } from './deletion-job';
import { ERASURE_STEPS, type ErasureSteps } from './erasure-steps';
import { ErasureLedger, ledgerEntry } from './erasure-ledger';
import { ErasureLedgerReplayer } from './erasure-ledger-replay';
import type { PrivacyMetrics } from './privacy.metrics';
import { SuppressionsService } from './suppressions.service';

/** A deletion job and the erasure ledger's replay over it. */
export interface DeletionWork {
  job: DeletionJob;
  ledger: ErasureLedgerReplayer;
}

/**
 * What runs deletions (the service's listener, the CLI's `--wait` and ledger replay) builds its
 * job from: the erasure steps in their order, the ledger, the audit record of an ended deletion.
 */
@Injectable()
export class DeletionRunner {
  constructor(
    @Inject(APP_CONFIG) private readonly config: ConfigSlice<'erasureLedgerPath' | 'erasurePausePercent'>,
    private readonly deletions: DeletionRepository,
    @Inject(ERASURE_STEPS) private readonly steps: ErasureSteps,
    private readonly audit: AuditService,
    private readonly suppressions: SuppressionsService,
    private readonly secrets: CursorSecretRepository,
    private readonly apps: AppsService,
    private readonly keys: KeysService,
  ) {}

  /** A job (counted in `metrics` when given; it stops between pieces once `stopping`) and its ledger replay. */
  open(options: { metrics?: PrivacyMetrics; stopping?: () => boolean } = {}): DeletionWork {
    const ledger = new ErasureLedger(this.config.erasureLedgerPath);
    const job = new DeletionJob(
      this.deletions,
      this.steps,
      {
        metrics: options.metrics,
        ended: deletionEnded(this.audit),
        beforeDone: ledgerEntry(ledger, this.suppressions),
        pausePercent: this.config.erasurePausePercent,
        userKeys: userKeysOf(this.secrets),
      },
      options.stopping,
    );
    const replayer = new ErasureLedgerReplayer(
      ledger,
      this.deletions,
      this.suppressions,
      this.apps,
      this.audit,
      job,
      this.keys,
    );
    return { job, ledger: replayer };
  }

  /** The deletion's row, or null. */
  find(id: string): Promise<DeletionRow | null> {
    return this.deletions.find(id);
  }

  /** The deletions not yet ended, oldest first: the runners' queue. */
  unfinished(limit: number): Promise<{ id: string; notBefore: number }[]> {
    return this.deletions.unfinished(limit);
  }
}
