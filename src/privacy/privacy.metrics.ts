import { Injectable } from '@nestjs/common';
import { Counter, Histogram } from 'prom-client';
import { MetricsService } from '@app/common/metrics/metrics.service';
import { UserSuppressions } from '@app/common/suppressions/user-suppressions';

const DELETION_BUCKETS = [1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600];

/** The privacy metrics, in the service's registry. */
@Injectable()
export class PrivacyMetrics {
  private readonly deletions: Counter<'status'>;
  private readonly duration: Histogram;

  constructor(metrics: MetricsService, suppressions: UserSuppressions) {
    const registers = [metrics.registry];
    this.deletions = new Counter({
      name: 'tally_deletions_total',
      help: 'Deletions by status: requested (`pending`) on this instance, or ended (`done`, `failed`) by it.',
      labelNames: ['status'] as const,
      registers,
    });
    this.duration = new Histogram({
      name: 'tally_deletion_duration_seconds',
      help: 'Time from a deletion request to its end, for the deletions this instance finished.',
      buckets: DELETION_BUCKETS,
      registers,
    });
    let counted = 0;
    new Counter({
      name: 'tally_events_suppressed_total',
      help: 'Events refused because their user is suppressed (code user_suppressed).',
      registers,
      collect() {
        const now = suppressions.suppressedEvents;
        if (now > counted) this.inc(now - counted);
        counted = now;
      },
    });
  }

  requested(): void {
    this.deletions.inc({ status: 'pending' });
  }

  ended(status: 'done' | 'failed', seconds: number): void {
    this.deletions.inc({ status });
    this.duration.observe(seconds);
  }
}
