import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';

// Other work that held the event loop this long during one of its turns means requests are
// waiting behind the export (the export's own database reads cost well under this per turn).
const CONTENDED_MS = 2;
// The longest single pause: the export never stalls for long, even after a large piece.
const MAX_PAUSE_MS = 25;

/**
 * Lets other requests of this process run between two pieces of an export. When the event loop
 * is otherwise idle this is one turn. When other work is waiting (ingest, reads), the export
 * pauses as long as its last piece took, so that it holds at most about half of the loop and
 * the rest of the instance keeps its pace.
 */
export async function shareEventLoop(workMs: number): Promise<void> {
  const before = performance.now();
  await nextTurn();
  if (performance.now() - before >= CONTENDED_MS) await sleep(Math.min(workMs, MAX_PAUSE_MS));
}
