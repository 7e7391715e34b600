import { DAY_MS, HOUR_MS, utcDateString, utcDayStart } from '@app/common/time';
import {
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
  OnApplicationShutdown,
  Optional,
} from '@nestjs/common';
import { Interval, SchedulerRegistry } from '@nestjs/schedule';
import { BackgroundJob, startJob } from '@app/common/jobs';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { filledRangesEnd, PartitionRepository } from './partition.repository';

/**
 * How long a summary pass waits for a partition's table lock before it leaves that partition to
 * the next pass. Short: the lock is only ever held by upkeep (autovacuum, index builds, another
 * instance's pass), never by ingest or reads.
 */
const LOOKUP_LOCK_TIMEOUT_MS = 200;

/**
 * Keeps the daily partitions of `events` ready: every day an accepted event can land in
 * (from the oldest allowed event time to a clamped future one, plus PARTITIONS_AHEAD_DAYS)
 * exists before an insert needs it. Drops partitions past EVENT_RETENTION_DAYS (rollups stay)
 * and indexes the user, session and event-name filters: with a BRIN lookup index on the days
 * ingest still writes, whose new ranges it summarizes every LOOKUP_SUMMARY_INTERVAL_MS, and with
 * B-trees once a day has ended.
 */
@Injectable()
export class PartitionMaintenanceService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(PartitionMaintenanceService.name);

  constructor(
    private readonly partitions: PartitionRepository,
    @Inject(APP_CONFIG)
    private readonly config: ConfigSlice<
      'eventRetentionDays' | 'ingestMaxEventAgeDays' | 'lookupSummaryIntervalMs' | 'partitionsAheadDays'
    >,
    @Optional() private readonly registry?: SchedulerRegistry,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    // Before the first request: an insert must never find its partition missing.
    await this.ensurePartitions(Date.now());
    // A current partition made before its lookup index existed (an upgrade, a restored dump)
    // gets it now rather than at the next hourly run. In the background: on a large day the
    // build takes seconds, and it need not hold up the first request.
    this.pendingLookups = this.indexCurrentDays(Date.now()).catch((err: Error) => {
      this.logger.error(`building the current days' lookup indexes failed: ${err.message}`);
      return [];
    });
    if (this.config.lookupSummaryIntervalMs > 0 && this.registry) {
      this.summaryJob = startJob(this.registry, {
        name: 'lookup-summaries',
        everyMs: this.config.lookupSummaryIntervalMs,
        run: () => this.summarizeLookups(),
        logger: this.logger,
      });
    }
  }

  /** The start-up pass over the current days' lookup indexes, while it runs (for shutdown and tests). */
  pendingLookups: Promise<string[]> = Promise.resolve([]);

  private summaryJob?: BackgroundJob;

  async onApplicationShutdown(): Promise<void> {
    await this.summaryJob?.stop();
    await this.pendingLookups;
  }

  /** Per lookup index, the first block whose range this instance has not summarized yet. */
  private readonly summarizedUpTo = new Map<string, number>();

  /**
   * One summary pass over the lookup indexes of every partition, the `lookup-summaries` job
   * (one pass at a time). Until a range is summarized, every read of its day that the lookup
   * index serves (a sessionId, an anonymousUserId, a rare eventName) reads all of its rows; at
   * 30,000 events/s and the default 2 s, that is under 60,000 rows, plus the two ranges still
   * being filled. Returns the ranges summarized and the indexes left to the next pass because
   * their partition was locked.
   */
  async summarizeLookups(
    lockTimeoutMs = LOOKUP_LOCK_TIMEOUT_MS,
  ): Promise<{ ranges: number; skipped: string[] }> {
    let ranges = 0;
    const skipped: string[] = [];
    const indexes = await this.partitions.lookupIndexes();
    for (const { index, blocks } of indexes) {
      const from = this.summarizedUpTo.get(index) ?? 0;
      const to = filledRangesEnd(blocks);
      // Nothing filled since the last pass: no transaction, no lock.
      if (to <= from) continue;
      const summarized = await this.partitions.summarizeRanges(index, from, to, lockTimeoutMs);
      if (summarized === null) {
        skipped.push(index);
        continue;
      }
      ranges += summarized;
      this.summarizedUpTo.set(index, to);
    }
    // Forget the indexes of partitions that were dropped or have ended (their B-trees replace them).
    const listed = new Set(indexes.map((i) => i.index));
    for (const index of this.summarizedUpTo.keys()) if (!listed.has(index)) this.summarizedUpTo.delete(index);
    return { ranges, skipped };
  }

  @Interval('partition-maintenance', HOUR_MS)
  async scheduled(): Promise<void> {
    try {
      await this.run(Date.now());
    } catch (err) {
      this.logger.error(`partition maintenance failed: ${(err as Error).message}`);
    }
  }

  async run(now: number): Promise<{ created: number; dropped: string[]; indexed: string[] }> {
    const created = await this.ensurePartitions(now);
    const dropped = await this.dropExpired(now);
    const indexed = await this.indexFilters(now);
    return { created, dropped, indexed };
  }

  /**
   * The anonymousUserId, sessionId and eventName filters get B-trees only on days that have
   * ended. Their B-trees on the partition being written would cost about what the rest of an
   * event's insert costs; an ended day takes only late events, so its B-trees cost ingest almost
   * nothing. The days ingest still writes get one BRIN lookup index instead (new partitions are
   * created with it; this adds it to older ones).
   */
  async indexFilters(now: number): Promise<string[]> {
    return this.indexDays(now, { endedDays: true });
  }

  /** Adds the lookup index to the partitions of today and the days ahead that lack it. */
  async indexCurrentDays(now: number): Promise<string[]> {
    return this.indexDays(now, { endedDays: false });
  }

  private async indexDays(now: number, { endedDays }: { endedDays: boolean }): Promise<string[]> {
    const today = utcDateString(now);
    // null: another instance is doing the same upkeep right now.
    const built = await this.partitions.withIndexLock(async () => {
      const names: string[] = [];
      for (const p of await this.partitions.list()) {
        if (p.day < today) {
          if (endedDays) names.push(...(await this.partitions.indexFilters(p.name)));
        } else {
          names.push(...(await this.partitions.indexLookups(p.name)));
        }
      }
      return names;
    });
    return built ?? [];
  }

  async ensurePartitions(now: number): Promise<number> {
    const existing = new Set((await this.partitions.list()).map((p) => p.day));
    const today = utcDateString(now);
    // One extra day behind covers a client clock skew correction at the window's edge.
    const first = utcDayStart(now - (this.config.ingestMaxEventAgeDays + 1) * DAY_MS);
    const last = utcDayStart(now + this.config.partitionsAheadDays * DAY_MS);
    let created = 0;
    for (let t = first; t <= last; t += DAY_MS) {
      const day = utcDateString(t);
      if (existing.has(day)) continue;
      await this.partitions.create(new Date(t), { lookups: day >= today });
      created++;
    }
    return created;
  }

  async dropExpired(now: number): Promise<string[]> {
    // Never drop a day that ingest may still write to, even with a retention shorter than
    // the accepted event age: that insert would fail for a missing partition.
    const keepDays = Math.max(this.config.eventRetentionDays, this.config.ingestMaxEventAgeDays + 1);
    const cutoff = utcDateString(now - keepDays * DAY_MS);
    const dropped: string[] = [];
    for (const p of await this.partitions.list()) {
      if (p.day < cutoff) {
        await this.partitions.drop(p.name);
        dropped.push(p.name);
      }
    }
    if (dropped.length) this.logger.log(`dropped expired partitions: ${dropped.join(', ')}`);
    return dropped;
  }
}
