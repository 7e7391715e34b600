import { Inject, MiddlewareConsumer, Module, NestModule, OnModuleInit } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { READ_DATA_SOURCE } from '@app/database/database.module';
import { ReadDatabase } from '@app/database/read-database';
import { RateLimitStoreModule } from '@app/common/rate-limit/rate-limit.module';
import { MetricsModule } from '@app/common/metrics/metrics.module';
import { MetricsService, PoolStats } from '@app/common/metrics/metrics.service';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { DrainState } from './drain-state';
import { HttpMetricsMiddleware } from './http-metrics.middleware';
import { HealthController } from './health.controller';
import { MetricsController } from './metrics.controller';
import { ReadinessService } from './readiness.service';
import { watchReadRoute } from './read-route.metrics';

// TypeORM's postgres driver keeps its `pg` Pool in `master` (typed `any` there).
function poolOf(dataSource: DataSource): () => PoolStats | undefined {
  return () => (dataSource.driver as unknown as { master?: PoolStats }).master;
}

/** Health, readiness, metrics and the drain state used by graceful shutdown. */
@Module({
  imports: [MetricsModule, RateLimitStoreModule, TerminusModule.forRoot({ errorLogStyle: 'json' })],
  controllers: [HealthController, MetricsController],
  providers: [DrainState, ReadinessService, HttpMetricsMiddleware],
  exports: [DrainState],
})
export class OpsModule implements NestModule, OnModuleInit {
  constructor(
    private readonly metrics: MetricsService,
    @InjectDataSource() private readonly primary: DataSource,
    @InjectDataSource(READ_DATA_SOURCE) private readonly read: DataSource,
    private readonly readiness: ReadinessService,
    private readonly readDatabase: ReadDatabase,
    @Inject(APP_CONFIG) private readonly config: ConfigSlice<'readMaxLagMs' | 'rollupIntervalSeconds'>,
  ) {}

  onModuleInit(): void {
    this.metrics.watchPool('primary', poolOf(this.primary));
    this.metrics.watchPool('read', poolOf(this.read));
    this.metrics.watchPool('replica', () => {
      const replica = this.readDatabase.replicaDataSource();
      return replica ? poolOf(replica)() : undefined;
    });
    watchReadRoute(this.metrics.registry, this.readDatabase, this.config.readMaxLagMs);
    this.metrics.watchReadiness(() =>
      this.readiness.check().then(
        () => true,
        () => false,
      ),
    );
    this.metrics.setRollupInterval(this.config.rollupIntervalSeconds);
  }

  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(HttpMetricsMiddleware).forRoutes('*');
  }
}
