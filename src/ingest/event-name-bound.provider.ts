import { Logger, Provider } from '@nestjs/common';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { MetricsService } from '@app/common/metrics/metrics.service';
import { EventNameBound, NAMES_REFRESH_MS } from './event-name-bound';
import { EventNameRepository } from './event-name.repository';

/** The instance-wide EventNameBound, built from the configuration. */
export const EVENT_NAME_BOUND_PROVIDER: Provider = {
  provide: EventNameBound,
  inject: [APP_CONFIG, EventNameRepository, MetricsService],
  useFactory: (
    config: ConfigSlice<'ingestMaxEventNamesPerDay' | 'ingestMaxEventAgeDays'>,
    repository: EventNameRepository,
    metrics: MetricsService,
  ) => {
    const logger = new Logger(EventNameBound.name);
    return new EventNameBound(
      {
        limit: config.ingestMaxEventNamesPerDay,
        maxAgeDays: config.ingestMaxEventAgeDays,
        refreshMs: NAMES_REFRESH_MS,
        onLimitReached: () => metrics.recordEventNameLimitReached(),
        onLoadError: (err) => logger.warn(`could not load the stored event names of a day: ${String(err)}`),
      },
      (appId, day) => repository.namesOfDay(appId, day),
    );
  },
};
