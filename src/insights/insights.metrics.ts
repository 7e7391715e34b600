import { Injectable } from '@nestjs/common';
import { Counter } from 'prom-client';
import { MetricsService } from '@app/common/metrics/metrics.service';

/**
 * What the insights step did with a local day: read and numbered all its events, added only the
 * events it gained to its rows, or kept its rows.
 */
export type InsightDayOutcome = 'computed' | 'added' | 'kept';

/** The insights metrics, in the service's registry. */
@Injectable()
export class InsightsMetrics {
  private readonly days: Counter<'outcome'>;

  constructor(metrics: MetricsService) {
    this.days = new Counter({
      name: 'tally_insight_days_total',
      help:
        'Local days the rollup computation gave to insights on this instance: `computed` (all their events read ' +
        'and numbered), `added` (only the events they gained, added to their rows) or `kept` (inputs unchanged ' +
        'since their rows were computed).',
      labelNames: ['outcome'] as const,
      registers: [metrics.registry],
    });
    for (const outcome of ['computed', 'added', 'kept'] as const) this.days.inc({ outcome }, 0);
  }

  day(outcome: InsightDayOutcome): void {
    this.days.inc({ outcome });
  }
}
