import { Counter, Gauge, Registry } from 'prom-client';
import type { ReadDatabase, ReadTarget } from '@app/database/read-database';

const TARGETS: ReadTarget[] = ['replica', 'primary'];

/**
 * The replica routing's metrics, registered only when a replica is configured (so that a
 * deployment without one never shows reads "on the primary" to the alerts):
 * `tally_read_replica_lag_seconds`, `tally_read_max_lag_seconds`, `tally_read_route{target}` (1 for the pool that serves reads
 * now) and `tally_read_route_switches_total{to}`.
 */
export function watchReadRoute(registry: Registry, read: ReadDatabase, maxLagMs: number): void {
  if (!read.status()) return;
  // The limit as a series, so that one alert rule fits every deployment's READ_MAX_LAG_MS.
  new Gauge({
    name: 'tally_read_max_lag_seconds',
    help: 'READ_MAX_LAG_MS in seconds: past this replica lag, reads go to the primary.',
    registers: [registry],
  }).set(maxLagMs / 1000);
  new Gauge({
    name: 'tally_read_replica_lag_seconds',
    help: 'Replication lag of the read replica at its last check (0 when it has replayed everything; NaN when unreachable).',
    registers: [registry],
    collect() {
      this.set(read.status()?.lagSeconds ?? NaN);
    },
  });
  new Gauge({
    name: 'tally_read_route',
    help: 'Which database serves event and rollup reads now: 1 for the target in use, 0 for the other.',
    labelNames: ['target'] as const,
    registers: [registry],
    collect() {
      const now = read.status()?.target;
      for (const target of TARGETS) this.set({ target }, target === now ? 1 : 0);
    },
  });
  const switches = new Counter({
    name: 'tally_read_route_switches_total',
    help: 'Switches of the read target, by the target reads moved to.',
    labelNames: ['to'] as const,
    registers: [registry],
  });
  for (const to of TARGETS) switches.inc({ to }, 0);
  read.onSwitch((change) => switches.inc({ to: change.to }));
}
