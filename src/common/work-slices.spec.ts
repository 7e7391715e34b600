import { WorkSlices } from './work-slices';

const busy = (ms: number) => {
  const until = performance.now() + ms;
  while (performance.now() < until);
};

describe('WorkSlices', () => {
  it('is due once the slice has held the thread for its time, and not before', () => {
    const slices = new WorkSlices(20);
    expect(slices.due).toBe(false);
    busy(25);
    expect(slices.due).toBe(true);
  });

  it('lets work that was waiting run between slices, paused on either side, and starts a new slice', async () => {
    const order: string[] = [];
    const slices = new WorkSlices(5, {
      pause: () => order.push('pause'),
      resume: () => order.push('resume'),
    });
    busy(10);
    setImmediate(() => order.push('other request'));
    await slices.yield();
    expect(order).toEqual(['pause', 'other request', 'resume']);
    expect(slices.due).toBe(false);
  });
});
