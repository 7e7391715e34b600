/** Where reads go now. */
export type ReadTarget = 'replica' | 'primary';

/** A PostgreSQL LSN (`16/B374D848`) as a number of bytes. */
export function parseLsn(lsn: string | null | undefined): bigint | null {
  if (!lsn) return null;
  const match = /^([0-9A-F]+)\/([0-9A-F]+)$/i.exec(lsn);
  if (!match) return null;
  return (BigInt(`0x${match[1]}`) << 32n) + BigInt(`0x${match[2]}`);
}

/** One look at the replica (and the primary) by the health loop. */
export interface ReplicaSample {
  /** The primary's `pg_current_wal_lsn()`; null when the primary did not answer. */
  primaryLsn: bigint | null;
  /** The replica's `pg_last_wal_replay_lsn()`; null when it is not a standby. */
  replayLsn: bigint | null;
  /** `now() - pg_last_xact_replay_timestamp()` on the replica, ms; null before its first replay. */
  replayAgeMs: number | null;
}

/**
 * The replica's lag, in ms.
 *
 * `now() - pg_last_xact_replay_timestamp()` alone is wrong on an idle primary: with nothing to
 * replay, the last replayed commit grows old while the replica is fully caught up. So the LSNs
 * decide whether the replica is behind at all, and, when it is, the lag is the shorter of the
 * replay age and the time since the primary first showed WAL that the replica has not replayed
 * yet (the primary's LSN is remembered at each check).
 */
export class LagEstimator {
  private readonly pending: { lsn: bigint; at: number }[] = [];
  private firstAt: number | null = null;

  estimate(sample: ReplicaSample, now: number): number {
    this.firstAt ??= now;
    // Not a standby (a primary used for reads, or a promoted replica): nothing to wait for.
    if (sample.replayLsn === null) {
      this.pending.length = 0;
      return 0;
    }
    const last = this.pending[this.pending.length - 1];
    if (sample.primaryLsn !== null && (!last || sample.primaryLsn > last.lsn)) {
      this.pending.push({ lsn: sample.primaryLsn, at: now });
      // Only the oldest unreplayed position matters; keep the list short while replay is stuck.
      if (this.pending.length > 600) this.pending.splice(1, 1);
    }
    while (this.pending.length && this.pending[0].lsn <= sample.replayLsn) this.pending.shift();
    if (!this.pending.length) return 0;
    const oldest = this.pending[0];
    // Behind since before the first check: how long is unknown, the replay age bounds it.
    if (oldest.at === this.firstAt) return sample.replayAgeMs ?? now - oldest.at;
    const behindFor = now - oldest.at;
    return sample.replayAgeMs === null ? behindFor : Math.min(sample.replayAgeMs, behindFor);
  }
}

export interface RouteChange {
  to: ReadTarget;
  reason: string;
}

/**
 * Where reads go, with hysteresis: one failed check, or one connection error of a read, sends
 * them to the primary at once; they return to the replica after `returnAfter` healthy checks in
 * a row, so that a replica hovering around the limit does not flip reads back and forth. The
 * route starts on the replica, as configured: a replica that is healthy from the start never
 * switches.
 */
export class ReadRoute {
  private current: ReadTarget = 'replica';
  private healthyInARow = 0;

  constructor(
    private readonly maxLagMs: number,
    private readonly returnAfter: number,
  ) {}

  get target(): ReadTarget {
    return this.current;
  }

  /** Records one check: `lagMs` null when the replica could not be reached. Returns a switch, if any. */
  observe(lagMs: number | null): RouteChange | null {
    if (lagMs === null) return this.unhealthy('the replica is unreachable');
    if (lagMs > this.maxLagMs) {
      return this.unhealthy(`the replica lags ${(lagMs / 1000).toFixed(1)} s, past READ_MAX_LAG_MS`);
    }
    this.healthyInARow++;
    if (this.current === 'primary' && this.healthyInARow >= this.returnAfter) {
      this.current = 'replica';
      return { to: 'replica', reason: `the replica was healthy for ${this.healthyInARow} checks in a row` };
    }
    return null;
  }

  /** A read lost its connection to the replica. */
  failed(): RouteChange | null {
    return this.unhealthy('a read lost its connection to the replica');
  }

  private unhealthy(reason: string): RouteChange | null {
    this.healthyInARow = 0;
    if (this.current === 'primary') return null;
    this.current = 'primary';
    return { to: 'primary', reason };
  }
}
