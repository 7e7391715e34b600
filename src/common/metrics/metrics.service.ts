import { Injectable } from '@nestjs/common';
import { getHeapStatistics } from 'node:v8';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

export interface IngestOutcome {
  accepted: number;
  duplicates: number;
  /** Rejected events of the batch, counted by their error code (e.g. `invalid_type`). */
  rejectedByCode: Record<string, number>;
  testMode: boolean;
  /** Where the events came from: `native` (POST /api/ingest), `segment` or `posthog`. */
  source?: string;
}

/** What became of a received event or message, for `tally_ingest_events_total`. */
export type IngestEventOutcome = 'accepted' | 'duplicate' | 'rejected' | 'acknowledged';

/**
 * `completed`: the run computed what was pending. `skipped`: another instance held the lock.
 * `failed`: the run threw. `abandoned`: the run stopped early because the process is shutting down.
 */
export type RollupOutcome = 'completed' | 'skipped' | 'failed' | 'abandoned';

export interface RollupRun {
  seconds: number;
  /** Age of the oldest change the run picked up, in seconds; 0 when nothing was pending. */
  lagSeconds?: number;
  outcome: RollupOutcome;
}

/** A connection pool the metrics can read (the `pg` Pool behind a TypeORM DataSource). */
export interface PoolStats {
  totalCount: number;
  idleCount: number;
  waitingCount: number;
}

// Seconds. Ingest commits and reads land in the tens of milliseconds; the tail buckets catch a
// slow database before clients time out.
const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const ROLLUP_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/**
 * Every Prometheus metric of the service, in a registry of its own (not prom-client's global
 * one), so that several app instances in one process never collide.
 */
@Injectable()
export class MetricsService {
  readonly registry = new Registry();
  private readonly pools = new Map<string, () => PoolStats | undefined>();
  private inflight: { read: () => number; limit: number } | null = null;
  private readiness: (() => Promise<boolean>) | null = null;

  private readonly httpRequests = new Counter({
    name: 'tally_http_requests_total',
    help: 'HTTP requests answered, by method, route template and status.',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });
  private readonly httpDuration = new Histogram({
    name: 'tally_http_request_duration_seconds',
    help: 'Time from request start to the end of the response, by method, route template and status.',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: HTTP_BUCKETS,
    registers: [this.registry],
  });
  private readonly eventsAccepted = new Counter({
    name: 'tally_events_accepted_total',
    help: 'Events stored by ingest.',
    labelNames: ['mode'] as const,
    registers: [this.registry],
  });
  private readonly eventsDuplicate = new Counter({
    name: 'tally_events_duplicate_total',
    help: 'Events not stored again because their eventId was already seen.',
    labelNames: ['mode'] as const,
    registers: [this.registry],
  });
  private readonly eventsRejected = new Counter({
    name: 'tally_events_rejected_total',
    help: 'Events rejected by ingest validation, by error code.',
    labelNames: ['code', 'mode'] as const,
    registers: [this.registry],
  });
  private readonly ingestEvents = new Counter({
    name: 'tally_ingest_events_total',
    help:
      'Events and messages received by ingest, by source (native, segment, posthog) and outcome ' +
      '(accepted, duplicate, rejected, acknowledged: an SDK message counted and not stored).',
    labelNames: ['source', 'outcome'] as const,
    registers: [this.registry],
  });
  private readonly eventNameLimitReached = new Counter({
    name: 'tally_event_name_limit_reached_total',
    help: 'App-days that reached INGEST_MAX_EVENT_NAMES_PER_DAY on this instance (new names are then rejected).',
    registers: [this.registry],
  });
  private readonly planViolations = new Counter({
    name: 'tally_plan_violations_total',
    help: 'Tracking-plan violations found at ingest (warnings under flag, rejections under enforce), by code.',
    labelNames: ['code'] as const,
    registers: [this.registry],
  });
  private readonly quarantineDropped = new Counter({
    name: 'tally_quarantine_dropped_total',
    help: 'Events a tracking plan rejected that the quarantine did not keep: the app-day had reached QUARANTINE_MAX_EVENTS_PER_DAY.',
    registers: [this.registry],
  });
  private readonly ingestWrites = new Histogram({
    name: 'tally_ingest_write_batches',
    help: 'Requests whose events were written by one ingest statement (group commit).',
    buckets: [1, 2, 4, 8, 16, 32, 64],
    registers: [this.registry],
  });
  private readonly ingestWriteEvents = new Histogram({
    name: 'tally_ingest_write_events',
    help: 'Events written by one ingest statement.',
    buckets: [10, 100, 250, 500, 1000, 2000, 5000],
    registers: [this.registry],
  });
  private readonly rollupDuration = new Histogram({
    name: 'tally_rollup_run_duration_seconds',
    help: 'Duration of rollup runs, by outcome.',
    labelNames: ['outcome'] as const,
    buckets: ROLLUP_BUCKETS,
    registers: [this.registry],
  });
  private readonly rollupLag = new Gauge({
    name: 'tally_rollup_lag_seconds',
    help: 'Age of the oldest change picked up by the last completed rollup run.',
    registers: [this.registry],
  });
  private readonly rollupLastSuccess = new Gauge({
    name: 'tally_rollup_last_success_timestamp_seconds',
    help: 'Unix time of the last completed rollup run on this instance.',
    registers: [this.registry],
  });
  private readonly rollupInterval = new Gauge({
    name: 'tally_rollup_interval_seconds',
    help: 'Configured time between two rollup runs (ROLLUP_INTERVAL_SECONDS).',
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    const pools = this.pools;
    const gauge = (name: string, help: string, read: (s: PoolStats) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ['pool'] as const,
        registers: [this.registry],
        collect() {
          this.reset();
          for (const [pool, stats] of pools) {
            const s = stats();
            if (s) this.set({ pool }, read(s));
          }
        },
      });
    gauge('tally_db_pool_connections', 'Open connections of a database pool.', (s) => s.totalCount);
    gauge('tally_db_pool_idle_connections', 'Idle connections of a database pool.', (s) => s.idleCount);
    gauge(
      'tally_db_pool_waiting_requests',
      'Queries waiting for a free connection of a database pool.',
      (s) => s.waitingCount,
    );
    this.scrapeTimeGauges();
  }

  /** Gauges read at scrape time: the ingest body budget, readiness and the V8 heap cap. */
  private scrapeTimeGauges(): void {
    // prom-client calls collect() with the gauge as `this`, so the sources are read through closures.
    const inflight = () => this.inflight;
    const readiness = () => this.readiness;
    new Gauge({
      name: 'tally_ingest_inflight_bytes',
      help: 'Decoded ingest body bytes held by requests not yet answered (the in-flight budget in use).',
      registers: [this.registry],
      collect() {
        const source = inflight();
        if (source) this.set(source.read());
      },
    });
    new Gauge({
      name: 'tally_ingest_inflight_limit_bytes',
      help: 'The in-flight budget, INGEST_MAX_INFLIGHT_BYTES; past it new ingest bodies get 503.',
      registers: [this.registry],
      collect() {
        const source = inflight();
        if (source) this.set(source.limit);
      },
    });
    new Gauge({
      name: 'tally_ready',
      help: '1 when the readiness checks (as GET /readyz runs them) pass, 0 when they fail.',
      registers: [this.registry],
      async collect() {
        const probe = readiness();
        if (probe) this.set((await probe()) ? 1 : 0);
      },
    });
    new Gauge({
      name: 'tally_heap_limit_bytes',
      help: 'The V8 heap cap of the process (--max-old-space-size), for heap-usage ratios.',
      registers: [this.registry],
      collect() {
        this.set(getHeapStatistics().heap_size_limit);
      },
    });
  }

  /** Reports the ingest in-flight budget: bytes held now, and the configured limit. */
  watchIngestInflight(read: () => number, limit: number): void {
    this.inflight = { read, limit };
  }

  /** Runs `probe` at every scrape for `tally_ready`; it resolves false when not ready. */
  watchReadiness(probe: () => Promise<boolean>): void {
    this.readiness = probe;
  }

  setRollupInterval(seconds: number): void {
    this.rollupInterval.set(seconds);
  }

  /** Registers a pool whose usage `/metrics` reports under the label `pool`. */
  watchPool(name: string, stats: () => PoolStats | undefined): void {
    this.pools.set(name, stats);
  }

  observeHttp(method: string, route: string, status: number, seconds: number): void {
    const labels = { method, route, status: String(status) };
    this.httpRequests.inc(labels);
    this.httpDuration.observe(labels, seconds);
  }

  recordIngest(outcome: IngestOutcome): void {
    const mode = outcome.testMode ? 'test' : 'live';
    if (outcome.accepted > 0) this.eventsAccepted.inc({ mode }, outcome.accepted);
    if (outcome.duplicates > 0) this.eventsDuplicate.inc({ mode }, outcome.duplicates);
    let rejected = 0;
    for (const [code, n] of Object.entries(outcome.rejectedByCode)) {
      if (n > 0) this.eventsRejected.inc({ code, mode }, n);
      rejected += n;
    }
    const source = outcome.source ?? 'native';
    this.recordIngestEvents(source, 'accepted', outcome.accepted);
    this.recordIngestEvents(source, 'duplicate', outcome.duplicates);
    this.recordIngestEvents(source, 'rejected', rejected);
  }

  /** Received events or SDK messages of one source with one outcome. */
  recordIngestEvents(source: string, outcome: IngestEventOutcome, n: number): void {
    if (n > 0) this.ingestEvents.inc({ source, outcome }, n);
  }

  /** An app-day refused its first new event name on this instance. */
  recordEventNameLimitReached(): void {
    this.eventNameLimitReached.inc();
  }

  /** The tracking-plan violations of one ingest request, by code. */
  recordPlanViolations(byCode: Record<string, number>): void {
    for (const [code, n] of Object.entries(byCode)) if (n > 0) this.planViolations.inc({ code }, n);
  }

  /** Rejected events the quarantine had no room for (QUARANTINE_MAX_EVENTS_PER_DAY). */
  recordQuarantineDropped(n: number): void {
    if (n > 0) this.quarantineDropped.inc(n);
  }

  /** One committed ingest statement: how many requests and events it carried. */
  recordIngestWrite(batches: number, events: number): void {
    this.ingestWrites.observe(batches);
    this.ingestWriteEvents.observe(events);
  }

  observeRollupRun(run: RollupRun): void {
    this.rollupDuration.observe({ outcome: run.outcome }, run.seconds);
    if (run.outcome === 'completed') {
      this.rollupLastSuccess.set(Date.now() / 1000);
      this.rollupLag.set(run.lagSeconds ?? 0);
    }
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }
}
