interface KeySpend {
  running: number;
  /** Milliseconds the key may still spend; refills at the budget's rate per second. */
  credit: number;
  refilledAt: number;
}

export type BudgetAdmission =
  { ok: true } | { ok: false; reason: 'concurrency' } | { ok: false; reason: 'time'; retryAfterMs: number };

/**
 * Per key on this instance: how many of its requests run, and how many milliseconds of some
 * cost (read time, an export's work) it may still spend. Credit refills at `msPerSecond` up to
 * `burstMs`, so a key that was idle may spend a burst at once; a request is admitted while the
 * key has credit left and is charged what it cost when it ends, so credit can go below zero and
 * the key then waits until it refills.
 */
export class KeyTimeBudgets {
  private readonly keys = new Map<string, KeySpend>();

  constructor(private readonly burstMs: (msPerSecond: number) => number) {}

  take(keyId: string, maxRunning: number, msPerSecond: number, now = Date.now()): BudgetAdmission {
    let entry = this.keys.get(keyId);
    if (!entry) {
      entry = { running: 0, credit: this.burstMs(msPerSecond), refilledAt: now };
      this.keys.set(keyId, entry);
    }
    const wait = this.refill(entry, msPerSecond, now);
    if (entry.running >= maxRunning) return { ok: false, reason: 'concurrency' };
    if (wait !== null) return { ok: false, reason: 'time', retryAfterMs: wait };
    entry.running++;
    return { ok: true };
  }

  /** Charges `spentMs` of a request that is still running (its `give` charges only the rest). */
  spend(keyId: string, spentMs: number): void {
    const entry = this.keys.get(keyId);
    if (entry) entry.credit -= spentMs;
  }

  /** The wait until the key has credit again, after refilling it; null while it has some. */
  overdrawn(keyId: string, msPerSecond: number, now = Date.now()): number | null {
    const entry = this.keys.get(keyId);
    return entry ? this.refill(entry, msPerSecond, now) : null;
  }

  /** Adds the credit earned since the last refill, up to the burst; returns `overdrawn`'s wait. */
  private refill(entry: KeySpend, msPerSecond: number, now: number): number | null {
    entry.credit = Math.min(
      this.burstMs(msPerSecond),
      entry.credit + ((now - entry.refilledAt) * msPerSecond) / 1000,
    );
    entry.refilledAt = now;
    return entry.credit > 0 ? null : (-entry.credit * 1000) / msPerSecond;
  }

  /** A request of the key ended after costing `spentMs`: charge it. */
  give(keyId: string, spentMs: number, msPerSecond: number): void {
    const entry = this.keys.get(keyId);
    if (!entry) return;
    entry.running--;
    entry.credit -= spentMs;
    // A key with nothing running and full credit needs no entry.
    if (entry.running <= 0 && entry.credit >= this.burstMs(msPerSecond)) this.keys.delete(keyId);
  }
}
