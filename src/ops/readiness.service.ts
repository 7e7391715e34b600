import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { HealthCheckService, HealthIndicatorService, TypeOrmHealthIndicator } from '@nestjs/terminus';
import type { HealthCheckResult, HealthIndicatorFunction } from '@nestjs/terminus';
import { DataSource } from 'typeorm';
import { AppError } from '@app/common/app-error';
import { ReadDatabase, ReadTarget } from '@app/database/read-database';
import { RateLimitStore } from '@app/common/rate-limit/rate-limit.store';
import { RedisRateLimitStore } from '@app/common/rate-limit/redis-rate-limit.store';
import { DrainState } from './drain-state';

const CHECK_TIMEOUT_MS = 2_000;
const RETRY_AFTER_SECONDS = 5;

export type CheckStatus = 'up' | 'down' | 'degraded';

export interface CheckState {
  status: CheckStatus;
  /** `database_read` only: which database serves reads now, and the replica's last lag. */
  target?: ReadTarget;
  lagSeconds?: number | null;
}

export interface Readiness {
  status: 'ok' | 'degraded';
  checks: Record<string, CheckState>;
}

/**
 * Readiness: the primary database, the read replica when one is configured, Redis when
 * configured, and whether the process is draining. Only statuses leave the process; failure
 * messages (host names, addresses) go to the log.
 *
 * The replica never makes the service unready: while it is unreachable or too far behind, reads
 * go to the primary, and `database_read` is `degraded` with `target: "primary"`. Its state is
 * the read routing's last check (once a second), so /readyz costs the replica nothing.
 */
@Injectable()
export class ReadinessService {
  private readonly logger = new Logger('Readiness');

  constructor(
    private readonly health: HealthCheckService,
    private readonly indicators: HealthIndicatorService,
    private readonly typeorm: TypeOrmHealthIndicator,
    @InjectDataSource() private readonly primary: DataSource,
    private readonly read: ReadDatabase,
    private readonly store: RateLimitStore,
    private readonly drain: DrainState,
  ) {}

  private checks(): HealthIndicatorFunction[] {
    const checks: HealthIndicatorFunction[] = [
      () => {
        const session = this.indicators.check('shutdown');
        return this.drain.draining ? session.down({ message: 'draining' }) : session.up();
      },
      () => this.typeorm.pingCheck('database', { connection: this.primary }).withTimeout(CHECK_TIMEOUT_MS),
    ];
    const replica = this.read.status();
    if (replica) {
      checks.push(() => {
        const session = this.indicators.check('database_read');
        const state = { target: replica.target, lagSeconds: replica.lagSeconds };
        return replica.target === 'replica' ? session.up(state) : session.degraded(state);
      });
    }
    const store = this.store;
    if (store instanceof RedisRateLimitStore) {
      // Without Redis the limits fall back to per-instance counters and the service keeps
      // serving, so an outage degrades readiness instead of taking every instance out.
      checks.push(async () => {
        const session = this.indicators.check('redis');
        try {
          await store.ping(CHECK_TIMEOUT_MS);
          return session.up();
        } catch (err) {
          this.logger.warn(`redis unreachable: ${err instanceof Error ? err.message : String(err)}`);
          return session.degraded({ message: 'unreachable' });
        }
      });
    }
    return checks;
  }

  /** Resolves when ready (possibly degraded); throws a 503 AppError naming the failed checks. */
  async check(): Promise<Readiness> {
    let result: HealthCheckResult;
    try {
      result = await this.health.check(this.checks());
    } catch (err) {
      const response = (err as { getResponse?: () => unknown }).getResponse?.() as
        HealthCheckResult | undefined;
      if (!response?.details) throw err;
      const checks = statuses(response);
      const failed = Object.keys(checks).filter((name) => checks[name].status === 'down');
      throw new AppError('service_unavailable', `Not ready: ${failed.join(', ')}.`, {
        extra: { failed, checks },
        headers: { 'Retry-After': String(RETRY_AFTER_SECONDS) },
      });
    }
    return { status: result.status === 'degraded' ? 'degraded' : 'ok', checks: statuses(result) };
  }
}

function statuses(result: HealthCheckResult): Record<string, CheckState> {
  return Object.fromEntries(
    Object.entries(result.details).map(([name, detail]) => {
      const state: CheckState = { status: detail.status as CheckStatus };
      // The read route's fields only: other details may hold failure messages.
      if (name === 'database_read')
        Object.assign(state, { target: detail.target, lagSeconds: detail.lagSeconds });
      return [name, state];
    }),
  );
}
