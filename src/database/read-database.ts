import { Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { Interval } from '@nestjs/schedule';
import type { Client } from 'pg';
import type { DataSource } from 'typeorm';
import { createDataSource, DataSourceSettings } from './data-source';
import { connectClient } from './pg-client';
import { LagEstimator, parseLsn, ReadRoute, ReadTarget, ReplicaSample, RouteChange } from './read-route';
import { isConnectionError, isRecoveryConflict } from './transient-error';

export type { ReadTarget, RouteChange } from './read-route';

/** The replica's state as the health loop last saw it. */
export interface ReplicaStatus {
  target: ReadTarget;
  reachable: boolean;
  /** The lag at the last check, in seconds; null when that check could not reach the replica. */
  lagSeconds: number | null;
}

/**
 * The database that serves a read now. Every read repository (events, rollups, exports) runs
 * its queries through `run`, so that reads follow the replica routing in one place:
 *
 *     return this.read.run((db) => db.query(sql, params));
 *
 * Writes, key checks, the rollup computation, deletions and the CLI use the primary directly.
 */
export abstract class ReadDatabase {
  /** Runs a read on the database that serves reads now; see the implementations for retries. */
  abstract run<T>(work: (db: DataSource) => Promise<T>): Promise<T>;

  /** The replica's state; null when no replica is configured. */
  status(): ReplicaStatus | null {
    return null;
  }

  /** Calls `listener` at each switch of the read target. */
  onSwitch(listener: (change: RouteChange) => void): void {
    void listener;
  }

  /** The replica's DataSource once connected, for pool metrics; null otherwise. */
  replicaDataSource(): DataSource | null {
    return null;
  }
}

/** Reads on one database: the primary's read pool without a replica, and the CLI's connection. */
export class FixedReadDatabase extends ReadDatabase {
  constructor(private readonly db: DataSource) {
    super();
  }

  run<T>(work: (db: DataSource) => Promise<T>): Promise<T> {
    return work(this.db);
  }
}

const CHECK_INTERVAL_MS = 1_000;
const CHECK_TIMEOUT_MS = 2_000;

export interface ReplicaReadSettings {
  primaryUrl: string;
  /** The replica's pool: the read pool's settings with the replica's URL. */
  replica: DataSourceSettings;
  maxLagMs: number;
  returnAfterChecks: number;
}

/**
 * Reads on a streaming replica, with the primary's read pool as the fallback.
 *
 * A loop checks the replica once a second on a connection of its own (nothing is asked per
 * request): reachable, and its lag (see LagEstimator). While the replica is unreachable or lags
 * more than READ_MAX_LAG_MS, reads go to the primary; ReadRoute decides when they return. A
 * read that fails on the replica with a connection error moves reads to the primary at once and
 * is retried there once, so that a replica dying mid-request costs no error; a read the standby
 * cancelled for a recovery conflict is retried on the primary too, without moving the others.
 */
export class ReplicaReadDatabase
  extends ReadDatabase
  implements OnApplicationBootstrap, OnApplicationShutdown
{
  private readonly logger = new Logger('ReadRouting');
  private readonly route: ReadRoute;
  private readonly lag = new LagEstimator();
  private readonly listeners: ((change: RouteChange) => void)[] = [];
  private replica: DataSource | null = null;
  private replicaCheck: Client | null = null;
  private primaryCheck: Client | null = null;
  private checking = false;
  private stopped = false;
  private reachable = false;
  private lagMs: number | null = null;

  constructor(
    private readonly primary: DataSource,
    private readonly settings: ReplicaReadSettings,
  ) {
    super();
    this.route = new ReadRoute(settings.maxLagMs, settings.returnAfterChecks);
  }

  async run<T>(work: (db: DataSource) => Promise<T>): Promise<T> {
    const replica = this.route.target === 'replica' ? this.replica : null;
    if (!replica) return work(this.primary);
    if (!replica.isInitialized) {
      // Its pool was closed under us: a failure of the replica like a lost connection.
      this.apply(this.route.failed());
      return work(this.primary);
    }
    try {
      return await work(replica);
    } catch (err) {
      if (isConnectionError(err)) this.apply(this.route.failed());
      else if (!isRecoveryConflict(err)) throw err;
      // One retry on the primary; a recovery conflict leaves the route as it is.
      return work(this.primary);
    }
  }

  override status(): ReplicaStatus {
    const lagSeconds = this.lagMs === null ? null : this.lagMs / 1000;
    // Until the first healthy check has opened the replica's pool, reads run on the primary.
    const target = this.route.target === 'replica' && this.replica ? 'replica' : 'primary';
    return { target, reachable: this.reachable, lagSeconds };
  }

  override onSwitch(listener: (change: RouteChange) => void): void {
    this.listeners.push(listener);
  }

  override replicaDataSource(): DataSource | null {
    return this.replica;
  }

  onApplicationBootstrap(): void {
    void this.check();
  }

  @Interval('read-replica-check', CHECK_INTERVAL_MS)
  scheduledCheck(): void {
    void this.check();
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    await Promise.all(
      [this.replicaCheck?.end(), this.primaryCheck?.end()].map((p) => p?.catch(() => undefined)),
    );
    if (this.replica?.isInitialized) await this.replica.destroy().catch(() => undefined);
  }

  /** One health check; a check still running when the next is due makes that one skip. */
  private async check(): Promise<void> {
    if (this.checking || this.stopped) return;
    this.checking = true;
    try {
      const [sample, primaryLsn] = await Promise.all([this.sampleReplica(), this.primaryLsn()]);
      let lagMs = sample ? this.lag.estimate({ ...sample, primaryLsn }, Date.now()) : null;
      this.lagMs = lagMs;
      // The replica's pool is opened lazily, so that a replica that is down at boot never stops
      // the service from starting.
      if (lagMs !== null && !(await this.openReplica())) lagMs = null;
      this.reachable = lagMs !== null;
      if (!this.stopped) this.apply(this.route.observe(lagMs));
    } finally {
      this.checking = false;
    }
  }

  private async sampleReplica(): Promise<Omit<ReplicaSample, 'primaryLsn'> | null> {
    try {
      this.replicaCheck ??= await connect(this.settings.replica.url);
      const { rows } = await this.replicaCheck.query<{
        replay_lsn: string | null;
        replay_age_ms: number | null;
      }>(
        `SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()::text END AS replay_lsn,
                (extract(epoch FROM now() - pg_last_xact_replay_timestamp()) * 1000)::float8 AS replay_age_ms`,
      );
      return { replayLsn: parseLsn(rows[0].replay_lsn), replayAgeMs: rows[0].replay_age_ms };
    } catch (err) {
      if (this.reachable) this.logger.warn(`replica check failed: ${describe(err)}`);
      await this.replicaCheck?.end().catch(() => undefined);
      this.replicaCheck = null;
      return null;
    }
  }

  private async primaryLsn(): Promise<bigint | null> {
    try {
      this.primaryCheck ??= await connect(this.settings.primaryUrl);
      const { rows } = await this.primaryCheck.query<{ lsn: string }>(
        'SELECT pg_current_wal_lsn()::text AS lsn',
      );
      return parseLsn(rows[0].lsn);
    } catch {
      await this.primaryCheck?.end().catch(() => undefined);
      this.primaryCheck = null;
      return null;
    }
  }

  private async openReplica(): Promise<boolean> {
    if (this.replica?.isInitialized) return true;
    const dataSource = createDataSource(this.settings.replica);
    try {
      await dataSource.initialize();
    } catch (err) {
      this.logger.warn(`replica pool not opened: ${describe(err)}`);
      return false;
    }
    if (this.stopped) {
      await dataSource.destroy().catch(() => undefined);
      return false;
    }
    this.replica = dataSource;
    return true;
  }

  private apply(change: RouteChange | null): void {
    if (!change) return;
    if (change.to === 'primary') this.logger.warn(`reads moved to the primary: ${change.reason}`);
    else this.logger.log(`reads moved to the replica: ${change.reason}`);
    for (const listener of this.listeners) listener(change);
  }
}

function connect(url: string): Promise<Client> {
  // A replica that goes away is found by the next check, which connects again.
  return connectClient({
    connectionString: url,
    application_name: 'tally-read-check',
    connectionTimeoutMillis: CHECK_TIMEOUT_MS,
    query_timeout: CHECK_TIMEOUT_MS,
    statement_timeout: CHECK_TIMEOUT_MS,
  });
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
