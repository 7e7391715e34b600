// Pure batch sizing: how large a request body is, and how a batch refused with 413 is cut.

/** `{"sentAt":…,"events":[]}` */
export const BODY_OVERHEAD = 48;
/** The comma between events. */
export const EVENT_OVERHEAD = 1;

export interface Sized {
  /** UTF-8 bytes of the event's JSON. */
  bytes: number;
}

/** Request body bytes (before gzip, as the server measures them) of a batch. */
export function bodyBytes(batch: readonly Sized[]): number {
  return BODY_OVERHEAD + batch.reduce((n, e) => n + e.bytes + EVENT_OVERHEAD, 0);
}

/** Consecutive parts of at most `maxEvents` events and `maxBytes` body bytes (an event alone may exceed it). */
export function partition<T extends Sized>(batch: readonly T[], maxEvents: number, maxBytes: number): T[][] {
  const parts: T[][] = [];
  let part: T[] = [];
  let bytes = BODY_OVERHEAD;
  for (const e of batch) {
    if (part.length && (part.length >= maxEvents || bytes + e.bytes + EVENT_OVERHEAD > maxBytes)) {
      parts.push(part);
      part = [];
      bytes = BODY_OVERHEAD;
    }
    part.push(e);
    bytes += e.bytes + EVENT_OVERHEAD;
  }
  if (part.length) parts.push(part);
  return parts;
}

/** The limits a 413 problem body states (`limitEvents`, `limitBytes`); null when absent or unusable. */
export function limitsOf(body: Record<string, unknown> | null): {
  limitEvents: number | null;
  limitBytes: number | null;
} {
  const positive = (v: unknown) => (typeof v === 'number' && v >= 1 ? v : null);
  return { limitEvents: positive(body?.limitEvents), limitBytes: positive(body?.limitBytes) };
}

export interface SplitPlan<T> {
  limitEvents: number | null;
  limitBytes: number | null;
  /** The parts to send again, in order; empty when the batch is one event that can never be accepted. */
  parts: T[][];
}

/**
 * How to cut a batch the server refused with 413: by the limits it stated when the batch breaks
 * them, in halves when it is within them by our measure and still refused, and not at all when it
 * is one event larger than the stated byte limit.
 */
export function planSplit<T extends Sized>(
  batch: readonly T[],
  body: Record<string, unknown> | null,
): SplitPlan<T> {
  const { limitEvents, limitBytes } = limitsOf(body);
  const fitsEvents = limitEvents === null || batch.length <= limitEvents;
  const fitsBytes = limitBytes === null || bodyBytes(batch) <= limitBytes;
  let parts: T[][];
  if (batch.length === 1 && !fitsBytes) parts = [];
  else if (!fitsEvents || !fitsBytes)
    parts = partition(batch, limitEvents ?? Infinity, limitBytes ?? Infinity);
  else if (batch.length > 1) {
    const half = Math.ceil(batch.length / 2);
    parts = [batch.slice(0, half), batch.slice(half)];
  } else parts = [];
  return { limitEvents, limitBytes, parts };
}
