/**
 * Whether this instance's ingest is writing now. Ingest notes each statement it starts; bulk work
 * that would compete with it for the database (the export) asks before each piece and yields.
 * The database's cores are what ingest and an export share, so an export that reads as fast as
 * it can takes a large part of other apps' ingest rate (docs/performance.md).
 */
export class WritePressure {
  private lastWriteAt = Number.NEGATIVE_INFINITY;

  /** Ingest started a statement. */
  noteWrite(now = performance.now()): void {
    this.lastWriteAt = now;
  }

  /** Whether ingest started a statement within the last `withinMs`. */
  busy(withinMs: number, now = performance.now()): boolean {
    return now - this.lastWriteAt < withinMs;
  }
}
