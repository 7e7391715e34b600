/**
 * The keys seen within the last `windowMs`, most recent last. A key is contended while another
 * key was seen within the window: that is when per-key shares should bind. A key alone on the
 * instance owes no share to anyone.
 */
export class ActiveKeys {
  private readonly seen = new Map<string, number>();

  constructor(private readonly windowMs: number) {}

  /** Notes a request of the key at `now`. */
  touch(keyId: string, now: number): void {
    this.seen.delete(keyId);
    this.seen.set(keyId, now);
    this.prune(now);
  }

  /** Whether another key than `keyId` was seen within the window. */
  othersActive(keyId: string, now: number): boolean {
    this.prune(now);
    for (const id of this.seen.keys()) if (id !== keyId) return true;
    return false;
  }

  get size(): number {
    return this.seen.size;
  }

  /** Drops the keys not seen within the window (the map is in order of last sight). */
  private prune(now: number): void {
    for (const [id, at] of this.seen) {
      if (at > now - this.windowMs) return;
      this.seen.delete(id);
    }
  }
}
