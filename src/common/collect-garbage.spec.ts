import { constants, PerformanceObserver } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { collectYoungGarbage } from './collect-garbage';

/**
 * A full collection, so that none is under way when the window opens: a collection of the whole
 * heap that the test process had started (its incremental marking) could otherwise finish inside
 * the window and look like one of `run`'s.
 */
async function settleHeap(): Promise<void> {
  setFlagsFromString('--expose-gc');
  try {
    (runInNewContext('gc') as () => void)();
  } finally {
    setFlagsFromString('--no-expose-gc');
  }
  await new Promise((resolve) => setTimeout(resolve, 20));
}

/** The kinds of the collections V8 reports while `run` runs and just after. */
async function collectionsDuring(run: () => void): Promise<number[]> {
  await settleHeap();
  const kinds: number[] = [];
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries())
      kinds.push((entry as unknown as { detail: { kind: number } }).detail.kind);
  });
  observer.observe({ entryTypes: ['gc'] });
  run();
  await new Promise((resolve) => setTimeout(resolve, 20));
  observer.disconnect();
  return kinds;
}

describe('collectYoungGarbage', () => {
  it('runs a collection of the young generation, and only that', async () => {
    const kinds = await collectionsDuring(() => {
      for (let i = 0; i < 3; i++) collectYoungGarbage();
    });
    expect(kinds.filter((k) => k === constants.NODE_PERFORMANCE_GC_MINOR).length).toBeGreaterThanOrEqual(3);
    expect(kinds).not.toContain(constants.NODE_PERFORMANCE_GC_MAJOR);
  });

  it('leaves no collector where the code of the process could reach it', () => {
    expect(typeof (globalThis as { gc?: unknown }).gc).toBe('undefined');
    expect(runInNewContext('typeof gc')).toBe('undefined');
  });
});
