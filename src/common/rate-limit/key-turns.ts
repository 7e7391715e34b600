interface Turn {
  /** Whether a request of the key holds the turn. */
  held: boolean;
  /** Its waiters, oldest first. */
  queue: (() => void)[];
  /** performance.now() before which the next turn does not start. */
  freeAt: number;
  /** The pending wake-up or clean-up, if any. */
  timer: { cancel(): void } | null;
}

/** Runs `fn` after `ms`, or on the next turn of the event loop when there is nothing to wait. */
function later(fn: () => void, ms: number, keepAlive: boolean): { cancel(): void } {
  if (ms <= 0) {
    // setImmediate, not a 0 ms timer: Node waits at least 1 ms for any timer, which would cap a
    // busy key with a lifted budget at 1,000 turns a second.
    const immediate = setImmediate(fn);
    return { cancel: () => clearImmediate(immediate) };
  }
  const timeout = setTimeout(fn, ms);
  if (!keepAlive) timeout.unref();
  return { cancel: () => clearTimeout(timeout) };
}

/**
 * One turn at a time per key, in arrival order, and a pause after each turn in proportion to
 * what it cost: a key may hold the turn for at most `share` of the time. A released turn passes to
 * the next waiter on a later turn of the event loop at the earliest, so whatever other keys'
 * requests have waiting (socket reads, database answers) runs in between: one key's requests
 * arriving together run spread out, never back to back.
 */
export class KeyTurns {
  private readonly turns = new Map<string, Turn>();

  /** Resolves when the key's turn is the caller's; `release` must follow exactly once. */
  take(keyId: string, now = performance.now()): Promise<void> {
    const turn = this.turns.get(keyId);
    if (turn === undefined || (!turn.held && turn.queue.length === 0 && turn.freeAt <= now)) {
      turn?.timer?.cancel();
      this.turns.set(keyId, { held: true, queue: [], freeAt: 0, timer: null });
      return Promise.resolve();
    }
    const waiting = new Promise<void>((resolve) => turn.queue.push(resolve));
    // Pausing after the last turn, with nobody waiting until now: wake this one at the end of it.
    if (!turn.held && turn.queue.length === 1) this.schedule(keyId, turn, now);
    return waiting;
  }

  /**
   * Ends the caller's turn, which took `spentMs` of CPU; with `share` < 1, the key's next turn
   * starts `spentMs × (1 / share − 1)` ms later at the earliest.
   */
  release(keyId: string, spentMs = 0, share = 1, now = performance.now()): void {
    const turn = this.turns.get(keyId);
    if (turn === undefined || !turn.held) return;
    turn.held = false;
    turn.freeAt = now + (share >= 1 ? 0 : Math.min(MAX_PAUSE_MS, spentMs * (1 / share - 1)));
    if (turn.queue.length > 0) this.schedule(keyId, turn, now);
    else if (turn.freeAt <= now) this.turns.delete(keyId);
    else {
      // Nobody waits: the entry only remembers the pause, and goes when it is over.
      turn.timer = later(() => this.forget(keyId, turn), turn.freeAt - now, false);
    }
  }

  /** How long the key's pause after its last turn has still to run, in ms (0 when none). */
  pauseLeft(keyId: string, now = performance.now()): number {
    const turn = this.turns.get(keyId);
    return turn === undefined || turn.held ? 0 : Math.max(0, turn.freeAt - now);
  }

  /** Keys with a turn held, waited for or pausing (for tests and metrics). */
  get size(): number {
    return this.turns.size;
  }

  private schedule(keyId: string, turn: Turn, now: number): void {
    turn.timer?.cancel();
    const wake = () => {
      turn.timer = null;
      const next = turn.queue.shift();
      if (next === undefined) {
        this.forget(keyId, turn);
        return;
      }
      turn.held = true;
      next();
    };
    // Either way on a later turn of the event loop than the release.
    turn.timer = later(wake, turn.freeAt - now, true);
  }

  private forget(keyId: string, turn: Turn): void {
    if (this.turns.get(keyId) === turn && !turn.held && turn.queue.length === 0) this.turns.delete(keyId);
  }
}

/** The longest pause after one turn: a single very costly request does not park its key for long. */
export const MAX_PAUSE_MS = 1000;
