import { Logger } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { BackgroundJob, startJob } from './jobs';

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('background jobs', () => {
  const logger = { error: jest.fn() } as unknown as Logger & { error: jest.Mock };

  beforeEach(() => logger.error.mockClear());

  it('skips a tick while the previous run is still going, and stop() waits for that run', async () => {
    const gate = deferred();
    let runs = 0;
    const job = new BackgroundJob({ name: 'slow', everyMs: 1000, logger, run: () => (runs++, gate.promise) });
    job.tick();
    job.tick();
    expect(runs).toBe(1);
    let stopped = false;
    const stopping = job.stop().then(() => (stopped = true));
    await Promise.resolve();
    expect(stopped).toBe(false);
    gate.resolve();
    await stopping;
    job.tick();
    expect(runs).toBe(1);
  });

  it('logs a failed run with the job name and runs again at the next tick', async () => {
    let runs = 0;
    const job = new BackgroundJob({
      name: 'flaky',
      everyMs: 1000,
      logger,
      run: async () => {
        runs++;
        throw new Error('database away');
      },
    });
    job.tick();
    await job.stop().then(() => undefined);
    expect(logger.error).toHaveBeenCalledWith('flaky failed: database away');
    const again = new BackgroundJob({ name: 'flaky', everyMs: 1000, logger, run: () => void runs++ });
    again.tick();
    await again.stop();
    expect(runs).toBe(2);
  });

  it('registers the interval under its name, and runs at once when asked', async () => {
    const registry = new SchedulerRegistry();
    let runs = 0;
    const job = startJob(registry, {
      name: 'configured',
      everyMs: 60_000,
      logger,
      runAtStart: true,
      run: () => void runs++,
    });
    expect(registry.doesExist('interval', 'configured')).toBe(true);
    await job.stop();
    expect(runs).toBe(1);
    registry.deleteInterval('configured');
  });
});
