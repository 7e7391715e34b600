import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

type Collect = (options: { type: 'minor' | 'major' }) => void;

/**
 * V8's collector of the calling thread. V8 gives `gc` to the contexts made while --expose-gc is
 * set: one context is made with it, here, and the flag cleared again, so that nothing else of
 * the process (the server's own context included) sees it.
 */
const collector: Collect | null = (() => {
  try {
    setFlagsFromString('--expose-gc');
    return runInNewContext('gc') as Collect;
  } catch {
    return null;
  } finally {
    setFlagsFromString('--no-expose-gc');
  }
})();

/**
 * Frees the buffers that died young: a collection of the young generation only, which costs
 * about a millisecond and holds nothing else up for longer.
 *
 * For an export's socket reads. Each is memory outside V8's heap, and V8 collects such memory
 * only once some 64 MB of it has built up, which is the whole of the growth an export may cause
 * (decisions.md, "An export frees the socket's buffers after each chunk"). The reads of a chunk
 * are dropped once it is copied out, so a young collection after each chunk frees most of them
 * while they are still in the young generation.
 */
export function collectYoungGarbage(): void {
  collector?.({ type: 'minor' });
}
