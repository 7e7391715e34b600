import type { Type } from '@nestjs/common';
import type { RequestKey } from '@app/auth/authenticated-request';
import type { AppConfig } from '@app/config/config';
import { IngestCoreModule } from '@app/ingest/ingest-core.module';
import { IngestCheckService } from '@app/ingest/ingest-check.service';
import type { IngestResult } from '@app/ingest/ingest.types';
import { IngestPlansModule } from '@app/plans/ingest-plans.adapter';
import { QuarantineReplayModule } from '@app/plans/quarantine-replay.module';
import { QuarantineReplayService } from '@app/plans/quarantine-replay.service';
import { PlansCoreModule } from '@app/plans/plans-core.module';
import { PlansService } from '@app/plans/plans.service';
import { QuarantineService } from '@app/plans/quarantine.service';

/** What the `plans` and `quarantine` commands call. */
export interface PlanServices {
  plans: PlansService;
  quarantine: QuarantineService;
  replay: QuarantineReplayService;
  /** The dry run of POST /api/v1/plan/check: ingest's own evaluation, storing and counting nothing. */
  check(appId: string, events: unknown[], plan?: unknown): Promise<IngestResult>;
}

/** The modules of the `plans` and `quarantine` commands, and their configuration. */
export const PLANS_GROUP: { modules: Type[]; config: Partial<AppConfig> } = {
  modules: [PlansCoreModule, IngestCoreModule, IngestPlansModule, QuarantineReplayModule],
  // Every violation is listed, not only the first INGEST_MAX_ERRORS_LISTED: the check's table counts them.
  config: { ingestMaxErrorsListed: Number.MAX_SAFE_INTEGER },
};

export function planServices(get: <T>(token: Type<T>) => T): PlanServices {
  const plans = get(PlansService);
  const ingest = get(IngestCheckService);
  return {
    plans,
    quarantine: get(QuarantineService),
    replay: get(QuarantineReplayService),
    check: async (appId, events, plan) => {
      const key: RequestKey = { id: 'cli', kind: 'api', mode: 'live', appIds: [appId], scopes: [] };
      const body = { value: { events }, bytes: Buffer.byteLength(JSON.stringify(events)) };
      return ingest.check(key, body, {
        appId,
        plan: plan === undefined ? undefined : await plans.compile(plan),
      });
    },
  };
}
