import { Logger } from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';

/**
 * How the service's periodic background work starts. A job with a fixed period is a method with
 * `@Interval(name, ms)` from `@nestjs/schedule`. A job whose period, or whether it runs at all,
 * comes from the configuration starts with `startJob` at bootstrap, which registers it in the
 * same SchedulerRegistry under its name. Either way the schedule module stops every job before
 * the application shuts down, and nothing outside Nest (the CLI) starts one.
 *
 * `startJob` also gives the configured jobs what each used to write by hand: a tick that is still
 * running makes the next one skip, a failure is logged (never an unhandled rejection), and the
 * timer does not keep the process alive.
 */
export interface JobOptions {
  /** The job's name in the SchedulerRegistry and in its failure log line. */
  name: string;
  everyMs: number;
  run: () => Promise<unknown> | unknown;
  logger: Logger;
  /** Also runs once at start, without waiting a period. */
  runAtStart?: boolean;
}

export class BackgroundJob {
  private current: Promise<void> | null = null;
  private stopped = false;
  private timer?: NodeJS.Timeout;

  constructor(private readonly options: JobOptions) {}

  /** Runs the job every period; the timer does not keep the process alive. */
  schedule(): NodeJS.Timeout {
    // eslint-disable-next-line no-restricted-globals -- the one timer behind startJob.
    this.timer = setInterval(() => this.tick(), this.options.everyMs);
    this.timer.unref();
    return this.timer;
  }

  /** One run, unless the previous one still runs or the job was stopped. */
  tick(): void {
    if (this.current || this.stopped) return;
    this.current = (async () => {
      try {
        await this.options.run();
      } catch (err) {
        this.options.logger.error(`${this.options.name} failed: ${(err as Error).message}`);
      } finally {
        this.current = null;
      }
    })();
  }

  /** Stops further runs; resolves when a run in progress has ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.current;
  }
}

/** Starts a job whose period comes from the configuration; see the module comment. */
export function startJob(registry: SchedulerRegistry, options: JobOptions): BackgroundJob {
  const job = new BackgroundJob(options);
  registry.addInterval(options.name, job.schedule());
  if (options.runAtStart) job.tick();
  return job;
}
