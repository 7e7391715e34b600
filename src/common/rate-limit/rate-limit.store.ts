/**
 * Fixed-window counters shared by every limiter in the service: the per-key request limits
 * (through @nestjs/throttler), the per-key event limit and the per-address auth-failure limit.
 * In memory by default; in Redis when REDIS_URL is set, so that several instances share them.
 */
export interface WindowCount {
  /** Hits counted in the current window, including this one. */
  count: number;
  /** Milliseconds until the window resets. */
  resetMs: number;
}

/** The `Retry-After` of a full window: whole seconds until it resets, at least 1. */
export function retryAfterSeconds(window: Pick<WindowCount, 'resetMs'>): number {
  return Math.max(1, Math.ceil(window.resetMs / 1000));
}

export abstract class RateLimitStore {
  /** Adds `cost` to the counter of `key` and returns the new count. */
  abstract hit(key: string, cost: number, windowMs: number): Promise<WindowCount>;
  /** Reads the counter of `key` without changing it. */
  abstract peek(key: string): Promise<WindowCount>;
  abstract close(): Promise<void>;
}

/** How often, at most, a hit also drops the windows that have ended. */
const SWEEP_EVERY_MS = 10_000;

/**
 * The counters of one instance. Ended windows are dropped by the hits themselves, at most once
 * every SWEEP_EVERY_MS, so the store needs no timer of its own.
 */
export class MemoryRateLimitStore extends RateLimitStore {
  private readonly windows = new Map<string, { count: number; resetAt: number }>();
  private sweptAt = Date.now();

  async hit(key: string, cost: number, windowMs: number): Promise<WindowCount> {
    const now = Date.now();
    if (now - this.sweptAt >= SWEEP_EVERY_MS) this.sweep(now);
    let entry = this.windows.get(key);
    if (!entry || entry.resetAt <= now) {
      entry = { count: 0, resetAt: now + windowMs };
      this.windows.set(key, entry);
    }
    entry.count += cost;
    return { count: entry.count, resetMs: entry.resetAt - now };
  }

  async peek(key: string): Promise<WindowCount> {
    const now = Date.now();
    const entry = this.windows.get(key);
    if (!entry || entry.resetAt <= now) return { count: 0, resetMs: 0 };
    return { count: entry.count, resetMs: entry.resetAt - now };
  }

  private sweep(now: number): void {
    this.sweptAt = now;
    for (const [key, entry] of this.windows) if (entry.resetAt <= now) this.windows.delete(key);
  }

  async close(): Promise<void> {
    this.windows.clear();
  }
}
