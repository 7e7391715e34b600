import { constants, PerformanceObserver } from 'node:perf_hooks';
import { runInNewContext } from 'node:vm';
import { collectYoungGarbage } from './collect-garbage';

/** The kinds of the collections V8 reports while `run` runs and just after. */
async function collectionsDuring(run: () => void): Promise<number[]> {
  const kinds: number[] = [];
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) kinds.push((entry.detail as { kind: number }).kind);
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
