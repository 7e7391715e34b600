import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { isTransientDatabaseError } from '@app/database/transient-error';
import { WritePressure } from '@app/database/write-pressure';
import { CitusCluster } from '@app/database/citus';
import { MetricsService } from '@app/common/metrics/metrics.service';
import { commitWithinMs, dedupWindowMs } from './ingest.limits';
import { IngestRepository, WriteBatch } from './ingest.repository';

interface Pending extends WriteBatch {
  resolve(duplicates: number[]): void;
  reject(err: unknown): void;
}

/**
 * Group commit for ingest. Requests hand their accepted events to `write` and wait; at most
 * INGEST_WRITE_CONCURRENCY statements run at once, and each takes every batch that queued up
 * while the previous ones ran, up to INGEST_WRITE_MAX_EVENTS events, in one statement and one
 * transaction. A lone request is written at once; under load, the per-statement and per-commit
 * costs are shared by several requests. Every request is still answered only after the commit
 * that holds its events.
 *
 * On Citus a statement takes the batches of one app only (the oldest waiting batch's app): an
 * app's rows live on one worker, so each commit happens there alone, without two-phase commit,
 * which could let rows of an interrupted commit appear after the export horizon has passed them.
 */
@Injectable()
export class IngestWriter {
  private readonly queue: Pending[] = [];
  private running = 0;
  private readonly dedupWindowMs: number;
  private readonly commitWithinMs: number;

  constructor(
    @Inject(APP_CONFIG)
    private readonly config: ConfigSlice<
      'ingestWriteConcurrency' | 'ingestWriteMaxEvents' | 'ingestMaxEventAgeDays' | 'exportSettleMs'
    >,
    private readonly repository: IngestRepository,
    private readonly metrics: MetricsService,
    private readonly pressure: WritePressure,
    private readonly citus: CitusCluster,
  ) {
    this.dedupWindowMs = dedupWindowMs(config);
    this.commitWithinMs = commitWithinMs(config);
  }

  /** Stores `batch` durably; resolves with the positions in `batch.events` that were duplicates. */
  write(batch: WriteBatch): Promise<number[]> {
    return new Promise<number[]>((resolve, reject) => {
      this.queue.push({ ...batch, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.running < this.config.ingestWriteConcurrency && this.queue.length > 0) {
      const group = this.take();
      this.running++;
      this.pressure.noteWrite();
      void this.flush(group).finally(() => {
        this.pressure.noteWrite();
        this.running--;
        this.pump();
      });
    }
  }

  /**
   * The oldest waiting batches, up to the event cap; always at least one. On Citus, the oldest
   * batches of the oldest batch's app.
   */
  private take(): Pending[] {
    if (this.citus.enabled) return this.takeOneApp();
    let events = this.queue[0].events.length;
    let count = 1;
    while (count < this.queue.length) {
      const next = this.queue[count].events.length;
      if (events + next > this.config.ingestWriteMaxEvents) break;
      events += next;
      count++;
    }
    return this.queue.splice(0, count);
  }

  private takeOneApp(): Pending[] {
    const { appId } = this.queue[0];
    const group: Pending[] = [];
    const rest: Pending[] = [];
    let events = 0;
    let full = false;
    for (const p of this.queue) {
      if (full || p.appId !== appId) {
        rest.push(p);
        continue;
      }
      if (group.length > 0 && events + p.events.length > this.config.ingestWriteMaxEvents) {
        full = true;
        rest.push(p);
        continue;
      }
      events += p.events.length;
      group.push(p);
    }
    this.queue.splice(0, this.queue.length, ...rest);
    return group;
  }

  private async flush(group: Pending[]): Promise<void> {
    try {
      const duplicates = await this.repository.insertBatches(group, this.dedupWindowMs, this.commitWithinMs);
      this.metrics.recordIngestWrite(
        group.length,
        group.reduce((n, p) => n + p.events.length, 0),
      );
      group.forEach((p, i) => p.resolve(duplicates[i]));
    } catch (err) {
      if (group.length > 1 && !isTransientDatabaseError(err)) {
        // Not an outage, so something in one batch: write each alone, so that only the batch
        // at fault fails and the others are stored as if they had come one by one.
        for (const p of group) await this.flush([p]);
        return;
      }
      for (const p of group) p.reject(err);
    }
  }
}
