import { Inject, Injectable, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { PgListener } from '@app/common/pg-listener';
import { PLAN_CHANGED_CHANNEL } from './plans.repository';
import { PlansService } from './plans.service';

/**
 * Drops an app's compiled plan on this instance as soon as any instance (or the CLI) stores a
 * new version, so that a change is in force everywhere within a second. On reconnecting, every
 * compiled plan is dropped: a notification may have been missed meanwhile.
 */
@Injectable()
export class PlanChangeListener implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly channel: PgListener;

  constructor(
    @Inject(APP_CONFIG) config: ConfigSlice<'databaseUrl'>,
    private readonly plans: PlansService,
  ) {
    this.channel = new PgListener(
      config.databaseUrl,
      [PLAN_CHANGED_CHANNEL],
      'PlanChanges',
      'tally-listen-plans',
    );
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.channel.start({
      notified: (_channel, appId) => this.plans.forget(appId),
      resubscribed: () => this.plans.forgetAll(),
    });
  }

  async onApplicationShutdown(): Promise<void> {
    await this.channel.stop();
  }
}
