import { Inject, Injectable } from '@app/common/di';
import { AppError } from '@app/common/app-error';
import { normaliseAppId, UUID } from '@app/common/ids';
import { DAY_MS } from '@app/common/time';
import { addDays } from '@app/common/reads/time-params';
import { localDateString } from '@app/common/timezones';
import { AuditService } from '@app/audit/audit.service';
import type { AuditActor } from '@app/audit/audit.types';
import { APP_CONFIG, AppConfig } from '@app/config/config';
import { isValidPayloadKey, MAX_DECLARED_DIMENSIONS } from './dimensions';
import { DimensionRepository } from './dimension.repository';

export interface DimensionsChange {
  appId: string;
  dimensions: string[];
  previousDimensions: string[];
  /** The first local day recomputed with the new dimensions (the retained days), or null if none changed. */
  recomputeFrom: string | null;
}

/** `tally apps set-dimensions`: the payload keys an app's breakdowns keep. */
@Injectable()
export class DimensionsService {
  constructor(
    private readonly dimensions: DimensionRepository,
    private readonly audit: AuditService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /**
   * Declares the app's payload dimensions (at most 10 keys; none clears them), audited. The
   * retained days are marked for the rollup computation, which recomputes their breakdowns.
   */
  async set(
    appIdInput: string,
    keys: string[],
    actor: AuditActor,
    now = Date.now(),
  ): Promise<DimensionsChange> {
    const appId = normaliseAppId(appIdInput);
    if (!UUID.test(appId)) throw new AppError('invalid_body', `appId must be a UUID, got "${appIdInput}"`);
    const unique = [...new Set(keys)];
    if (unique.length > MAX_DECLARED_DIMENSIONS) {
      throw new AppError(
        'invalid_body',
        `At most ${MAX_DECLARED_DIMENSIONS} dimensions, got ${unique.length}.`,
      );
    }
    const bad = unique.find((k) => !isValidPayloadKey(k));
    if (bad !== undefined) {
      throw new AppError(
        'invalid_body',
        'A dimension is a payload key of 1 to 128 characters, no control characters.',
      );
    }
    return this.dimensions.transaction(async (tx) => {
      const found = await this.dimensions.setDimensions(tx, appId, unique);
      if (!found) throw new AppError('not_found', `No such app: ${appId}`);
      const changed = found.previous.join('\n') !== unique.join('\n');
      let recomputeFrom: string | null = null;
      if (changed) {
        const today = localDateString(now, found.zone);
        recomputeFrom = localDateString(now - this.config.eventRetentionDays * DAY_MS, found.zone);
        recomputeFrom = addDays(recomputeFrom, 1);
        await this.dimensions.markDays(tx, appId, found.zone, recomputeFrom, today);
        await this.audit.record(
          {
            action: 'app.dimensions_changed',
            actor,
            appId,
            targetId: appId,
            details: { from: found.previous, to: unique, recomputeFrom },
          },
          tx,
        );
      }
      return { appId, dimensions: unique, previousDimensions: found.previous, recomputeFrom };
    });
  }
}
