import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { Interval } from '@nestjs/schedule';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { PgListener } from '@app/common/pg-listener';
import { DELETIONS_CHANNEL } from './deletion.repository';
import type { DeletionJob } from './deletion-job';
import { DeletionRunner } from './deletion-runner';
import type { ErasureLedgerReplayer } from './erasure-ledger-replay';
import { PrivacyMetrics } from './privacy.metrics';
import { SUPPRESSIONS_CHANNEL } from './suppression.repository';
import { SuppressionsService } from './suppressions.service';

/** The fallback poll for deletions, should a notification be lost or a run fail. */
const POLL_MS = 5_000;
const QUEUE_PAGE = 20;

/**
 * The server's side of erasure. It keeps this instance's copy of the suppression list current
 * (a notification per change, the whole list again after a reconnect), and runs the deletions
 * that are due: at once on a notification, at their start time, and on a slow poll that also
 * picks up, after a restart, the deletions a crash interrupted.
 */
@Injectable()
export class PrivacyListener implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Deletions');
  private readonly listener: PgListener;
  private readonly job: DeletionJob;
  private readonly ledgerReplay: ErasureLedgerReplayer;
  private wake: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private stopping = false;
  private started = false;

  constructor(
    @Inject(APP_CONFIG) config: ConfigSlice<'databaseUrl'>,
    private readonly deletions: DeletionRunner,
    metrics: PrivacyMetrics,
    private readonly suppressions: SuppressionsService,
  ) {
    this.listener = new PgListener(
      config.databaseUrl,
      [SUPPRESSIONS_CHANNEL, DELETIONS_CHANNEL],
      'Privacy',
      'tally-listen-privacy',
    );
    const work = deletions.open({ metrics, stopping: () => this.stopping });
    this.job = work.job;
    this.ledgerReplay = work.ledger;
  }

  async onApplicationBootstrap(): Promise<void> {
    // Before anything is served: a restored database gets back every erasure made since its backup.
    await this.ledgerReplay.replay();
    await this.suppressions.loadAll();
    await this.listener.start({
      notified: (channel, payload) => {
        if (channel === SUPPRESSIONS_CHANNEL) void this.reload(payload);
        else this.kick();
      },
      resubscribed: () => {
        void this.suppressions
          .loadAll()
          .catch((err: Error) => this.logger.warn(`reload failed: ${err.message}`));
        this.kick();
      },
    });
    this.started = true;
  }

  /** The fallback poll: runs the deletions that are due. */
  @Interval('deletions-poll', POLL_MS)
  poll(): void {
    if (this.started) this.kick();
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopping = true;
    if (this.wake) clearTimeout(this.wake);
    await this.listener.stop();
    await this.running?.catch(() => undefined);
  }

  private async reload(appId: string): Promise<void> {
    await this.suppressions
      .reloadApp(appId)
      .catch((err: Error) => this.logger.warn(`reload failed: ${err.message}`));
  }

  /** Runs the due deletions now, or once the current pass ends. */
  private kick(): void {
    if (this.stopping) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.drain()
      .catch((err: Error) => this.logger.warn(`deletion pass failed: ${err.message}`))
      .finally(() => {
        this.running = null;
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
  }

  private async drain(): Promise<void> {
    const queue = await this.deletions.unfinished(QUEUE_PAGE);
    let nextStart = Infinity;
    for (const { id, notBefore } of queue) {
      if (this.stopping) return;
      const outcome = await this.job.run(id);
      if (outcome === 'not_ready') nextStart = Math.min(nextStart, notBefore);
    }
    if (nextStart !== Infinity) this.wakeAt(nextStart);
  }

  private wakeAt(at: number): void {
    if (this.wake) clearTimeout(this.wake);
    this.wake = setTimeout(() => this.kick(), Math.max(0, at - Date.now()) + 10);
    this.wake.unref();
  }
}
