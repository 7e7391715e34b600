import { Injectable } from '@nestjs/common';
import type { RequestKey } from '@app/auth/authenticated-request';
import type { AppliedPlan } from '@app/common/plans/ingest-plans.port';
import { BatchEvaluator } from './batch-evaluator';
import { DedupService } from './dedup.service';
import type { IngestBody } from './ingest-body.reader';
import type { IngestResult } from './ingest.types';

/** Whose rules a dry run applies: the app's, and a plan to use instead of its stored one. */
export interface CheckScope {
  appId: string;
  plan?: AppliedPlan;
}

/**
 * The result ingest would give a batch (POST /api/v1/plan/check): the same evaluation, with
 * nothing stored, counted or metered. The event rate and the day's event-name bound are left
 * alone; events already stored within the dedup window count as duplicates.
 */
@Injectable()
export class IngestCheckService {
  constructor(
    private readonly evaluator: BatchEvaluator,
    private readonly dedup: DedupService,
  ) {}

  async check(key: RequestKey, body: IngestBody, scope: CheckScope): Promise<IngestResult> {
    const batch = await this.evaluator.prepare(key, this.evaluator.envelope(body), scope);
    const { toStore, rejected, duplicates } = await this.evaluator.judge(batch, false);
    const repeated = toStore.length
      ? await this.dedup.alreadySeen(batch.appId, batch.receivedAt, toStore)
      : [];
    return this.evaluator.result(batch, body, {
      accepted: toStore.length - repeated.length,
      duplicates: duplicates + repeated.length,
      rejected,
    });
  }
}
