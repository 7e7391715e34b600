import type { DataSource } from 'typeorm';
import type { AppsService } from '@app/auth/apps.service';
import type { AuditService } from '@app/audit/audit.service';
import type { RequestKey } from '@app/auth/authenticated-request';
import type { AppConfig } from '@app/config/config';
import { DedupRepository } from '@app/ingest/dedup.repository';
import { EventNameBound, NAMES_REFRESH_MS } from '@app/ingest/event-name-bound';
import { EventNameRepository } from '@app/ingest/event-name.repository';
import { IngestRepository } from '@app/ingest/ingest.repository';
import { IngestService } from '@app/ingest/ingest.service';
import type { IngestResult } from '@app/ingest/ingest.types';
import { QuarantineReplayService } from '@app/ingest/quarantine-replay.service';
import { PlansRepository } from '@app/plans/plans.repository';
import { PlansService } from '@app/plans/plans.service';
import { QuarantineRepository } from '@app/plans/quarantine.repository';
import { QuarantineService } from '@app/plans/quarantine.service';
import { CursorSecretRepository } from '@app/common/reads/cursor-secret.repository';
import { UserSuppressions } from '@app/common/suppressions/user-suppressions';

/** What the `plans` and `quarantine` commands call. */
export interface PlanServices {
  plans: PlansService;
  quarantine: QuarantineService;
  replay: QuarantineReplayService;
  /** The dry run of POST /api/v1/plan/check: ingest's own path, storing and counting nothing. */
  check(appId: string, events: unknown[], plan?: unknown): Promise<IngestResult>;
}

/** A dependency the dry run never reaches (rate limits, the writer, metrics, the quarantine). */
function unused<T>(name: string): T {
  return new Proxy(
    {},
    {
      get() {
        throw new Error(`${name} is not available to a dry run`);
      },
    },
  ) as T;
}

/** The day's event-name bound for a replay run by the CLI: the stored names of each day it touches. */
function replayNameBound(dataSource: DataSource, config: AppConfig): EventNameBound {
  const names = new EventNameRepository(dataSource);
  return new EventNameBound(
    {
      limit: config.ingestMaxEventNamesPerDay,
      maxAgeDays: config.ingestMaxEventAgeDays,
      refreshMs: NAMES_REFRESH_MS,
    },
    (appId, day) => names.namesOfDay(appId, day),
  );
}

export function buildPlanServices(
  dataSource: DataSource,
  config: AppConfig,
  apps: AppsService,
  audit: AuditService,
): PlanServices {
  const plans = new PlansService(new PlansRepository(dataSource), audit);
  const quarantineRepository = new QuarantineRepository(dataSource);
  // Every violation is listed, not only the first INGEST_MAX_ERRORS_LISTED: the check's table counts them.
  const ingest = new IngestService(
    { ...config, ingestMaxErrorsListed: Number.MAX_SAFE_INTEGER },
    unused('the rate-limit store'),
    apps,
    unused('the ingest writer'),
    unused('the metrics'),
    unused('the event-name bound'),
    // The check of an app's CI applies the plan; suppressions are the server's and are not read here.
    new UserSuppressions(),
    plans,
    unused('the quarantine'),
    new DedupRepository(dataSource),
    quarantineRepository,
  );
  return {
    plans,
    quarantine: new QuarantineService(quarantineRepository, config, new CursorSecretRepository(dataSource)),
    replay: new QuarantineReplayService(
      config,
      plans,
      quarantineRepository,
      new IngestRepository(dataSource),
      apps,
      replayNameBound(dataSource, config),
    ),
    check: async (appId, events, plan) => {
      const key: RequestKey = { id: 'cli', kind: 'api', mode: 'live', appIds: [appId], scopes: [] };
      const body = { value: { events }, bytes: Buffer.byteLength(JSON.stringify(events)) };
      return ingest.ingest(key, body, undefined, {
        appId,
        plan: plan === undefined ? undefined : await plans.compile(plan),
      });
    },
  };
}
