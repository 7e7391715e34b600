// The in-memory send queue and the bookkeeping of flush() waiters. No timers, no I/O.
import type { Segment } from './spool.js';
import { BODY_OVERHEAD, EVENT_OVERHEAD } from './split.js';

export interface Entry {
  id: string;
  json: string;
  /** UTF-8 bytes of `json`. */
  bytes: number;
  /** Requests this event has been in. */
  attempts: number;
  /** Order of tracking, for flush(). */
  seq: number;
  /** Where the event is spooled, for trackDurable() events. */
  segment?: Segment;
}

export interface QueueBounds {
  maxEvents: number;
  maxBytes: number;
}

/** A FIFO of tracked events with a bound in events and bytes; past it the oldest are dropped. */
export class SendQueue {
  private entries: Entry[] = [];
  private head = 0;
  private bytes = 0;

  constructor(private readonly bounds: QueueBounds) {}

  get length(): number {
    return this.entries.length - this.head;
  }

  /** Appends `entry`; returns the entries dropped (oldest first) to stay within the bounds. */
  push(entry: Entry): Entry[] {
    this.entries.push(entry);
    this.bytes += entry.bytes;
    const dropped: Entry[] = [];
    while (this.length > this.bounds.maxEvents || (this.bytes > this.bounds.maxBytes && this.length > 1)) {
      const old = this.entries[this.head++];
      this.bytes -= old.bytes;
      dropped.push(old);
    }
    return dropped;
  }

  /**
   * The next batch within `maxEvents` and `maxBytes` of body. Events that could never fit a request
   * are taken out and returned apart, as `oversized`.
   */
  take(maxEvents: number, maxBytes: number): { batch: Entry[]; oversized: Entry[] } {
    const batch: Entry[] = [];
    const oversized: Entry[] = [];
    let bytes = BODY_OVERHEAD;
    while (this.head < this.entries.length && batch.length < maxEvents) {
      const e = this.entries[this.head];
      if (BODY_OVERHEAD + e.bytes > maxBytes) {
        this.shift();
        oversized.push(e);
        continue;
      }
      if (bytes + e.bytes + EVENT_OVERHEAD > maxBytes) break;
      this.shift();
      bytes += e.bytes + EVENT_OVERHEAD;
      batch.push(e);
    }
    this.compact();
    return { batch, oversized };
  }

  /** Puts entries back at the front, in order (the parts of a split batch go first). */
  unshift(entries: Entry[]): void {
    this.entries.splice(this.head, 0, ...entries);
    for (const e of entries) this.bytes += e.bytes;
  }

  private shift(): void {
    this.bytes -= this.entries[this.head++].bytes;
  }

  private compact(): void {
    if (this.head > 1024 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.head = 0;
    }
  }
}

interface Waiter {
  through: number;
  remaining: number;
  resolve(): void;
}

/** flush() callers, each waiting for the events tracked up to its call to be settled. */
export class FlushWaiters {
  private waiters: Waiter[] = [];

  /** Resolves once `remaining` events with `seq <= through` have settled. */
  wait(through: number, remaining: number): Promise<void> {
    return new Promise<void>((resolve) => this.waiters.push({ through, remaining, resolve }));
  }

  settled(seq: number): void {
    if (this.waiters.length === 0) return;
    let done = false;
    for (const w of this.waiters) if (seq <= w.through && --w.remaining <= 0) done = true;
    if (!done) return;
    const ready = this.waiters.filter((w) => w.remaining <= 0);
    this.waiters = this.waiters.filter((w) => w.remaining > 0);
    for (const w of ready) w.resolve();
  }
}

/** Request slots: at most `size` requests in flight; a released slot goes to the longest waiter. */
export class Slots {
  private used = 0;
  private waiting: (() => void)[] = [];

  constructor(private readonly size: number) {}

  get free(): boolean {
    return this.used < this.size && this.waiting.length === 0;
  }

  /** Takes a slot if one is free now. */
  tryAcquire(): boolean {
    if (!this.free) return false;
    this.used++;
    return true;
  }

  /** Resolves once a slot is held. Waiters come before tryAcquire(). */
  acquire(): Promise<void> {
    if (this.tryAcquire()) return Promise.resolve();
    return new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.used--;
  }
}
