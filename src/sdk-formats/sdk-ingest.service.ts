import { Inject, Injectable } from '@nestjs/common';
import { AppError } from '@app/common/app-error';
import type { WorkSlices } from '@app/common/work-slices';
import { MetricsService } from '@app/common/metrics/metrics.service';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { AppsService } from '@app/auth/apps.service';
import type { RequestKey } from '@app/auth/authenticated-request';
import type { IngestBody } from '@app/ingest/ingest-body.reader';
import { CpuMeter } from '@app/ingest/ingest-cpu.budget';
import { batchTooLarge } from '@app/ingest/ingest-errors';
import { maxEventsPerRequest } from '@app/ingest/ingest.limits';
import { IngestService } from '@app/ingest/ingest.service';
import type { EventIssue, IngestResult } from '@app/ingest/ingest.types';
import { accountPseudonyms } from '@app/ingest/pii';
import { emptyBatch, type AccountPseudonym, type BodyMapping, type MappedBatch } from './sdk-mapping';

export type SdkSource = 'segment' | 'posthog';

/** The batch metering result of POST /api/ingest, plus the messages counted and not stored. */
export interface SdkIngestResult extends IngestResult {
  /** Messages acknowledged and not stored (identify, group, alias, …); not in `received`. */
  acknowledged: number;
}

/** A parsed body's messages to map; null when it holds no message at all. */
export type BodyMapper = (body: unknown, pseudonym: AccountPseudonym) => BodyMapping | null;

function notABatch(field: string): AppError {
  return new AppError('invalid_body', 'The body holds no message; nothing was stored.', {
    errors: [{ field, code: 'missing_field', message: `${field} is required.` }],
  });
}

/**
 * Every message of `mapping` mapped, in slices of the thread: other requests go first after the
 * body's parse, which has just held it, and then between slices.
 */
async function mapInSlices(mapping: BodyMapping, slices: WorkSlices): Promise<MappedBatch> {
  await slices.yield();
  const out = emptyBatch(mapping.sentAt);
  for (let i = 0; i < mapping.messages.length; i++) {
    mapping.mapMessage(out, i);
    if (slices.due) await slices.yield();
  }
  return out;
}

/**
 * The SDK formats' path: the body, mapped onto Tally events by a pure mapping (account ids
 * pseudonymised on the way), then ingest's own path unchanged, with every rejected event kept in
 * the quarantine. Per-event results name the message's position in the SDK's batch.
 */
@Injectable()
export class SdkIngestService {
  constructor(
    @Inject(APP_CONFIG)
    private readonly config: ConfigSlice<
      'ingestMaxErrorsListed' | 'ingestMaxBytes' | 'ingestMaxEvents' | 'ingestRateEvents'
    >,
    private readonly ingest: IngestService,
    private readonly apps: AppsService,
    private readonly metrics: MetricsService,
  ) {}

  /** Runs a body through the mapping and ingest; the body's parsed value is released once mapped. */
  async run(
    source: SdkSource,
    key: RequestKey,
    body: IngestBody,
    map: BodyMapper,
    cpu: CpuMeter,
  ): Promise<SdkIngestResult> {
    const secret = await this.apps.piiSecret(key.appIds[0]);
    // An SDK's batch mostly holds one account's events: each id is hashed once per request.
    const pseudonymOf = accountPseudonyms(secret);
    const pseudonyms = new Map<string, string>();
    const pseudonym = (id: string) => {
      let p = pseudonyms.get(id);
      if (p === undefined) pseudonyms.set(id, (p = pseudonymOf(id)));
      return p;
    };
    const mapped = await this.mapBody(body, map, pseudonym, cpu);
    // The SDK's messages are garbage once mapped: let the collector have them while the batch is
    // written (a request's frames keep `body` to its end), instead of copying them from one young
    // generation to the next beside the mapped events.
    body.value = undefined;
    const result = mapped.events.length
      ? await this.ingest.ingest(
          key,
          { value: { events: mapped.events, sentAt: mapped.sentAt }, bytes: body.bytes },
          cpu,
          { source, keepRejected: true },
        )
      : this.empty(key, body.bytes);
    this.metrics.recordIngestEvents(source, 'acknowledged', mapped.acknowledged);
    this.metrics.recordIngestEvents(source, 'rejected', mapped.rejections.length);
    return this.merge(result, mapped);
  }

  /**
   * The body's messages mapped, in slices of the thread; a batch over the event limit is refused
   * before any message is mapped.
   */
  private async mapBody(
    body: IngestBody,
    map: BodyMapper,
    pseudonym: AccountPseudonym,
    cpu: CpuMeter,
  ): Promise<MappedBatch> {
    const mapping = cpu.time(() => map(body.value, pseudonym));
    if (mapping === null) throw notABatch('batch');
    const messages = mapping.messages.length;
    const max = maxEventsPerRequest(this.config);
    if (messages > max) {
      throw batchTooLarge(
        this.config,
        { events: messages, bytes: body.bytes },
        `The batch holds ${messages} messages; the limit is ${max}.`,
      );
    }
    return cpu.timeSliced((slices) => mapInSlices(mapping, slices));
  }

  /** The answer to a body of acknowledged (or unmappable) messages only. */
  private empty(key: RequestKey, bytes: number): IngestResult {
    return {
      received: 0,
      accepted: 0,
      duplicates: 0,
      rejected: 0,
      metered: 0,
      testMode: key.mode === 'test',
      payloadBytes: bytes,
      serverTime: Date.now(),
      errors: [],
      warnings: [],
      errorCounts: {},
      warningCounts: {},
    };
  }

  /** Ingest's result in the messages' positions, with the mapping's own warnings and rejections. */
  private merge(result: IngestResult, mapped: MappedBatch): SdkIngestResult {
    const at = (issue: EventIssue<string>) => ({
      ...issue,
      index: mapped.messageIndexes[issue.index] ?? issue.index,
    });
    const listed = this.config.ingestMaxErrorsListed;
    const errors = result.errors.map(at);
    const warnings = result.warnings.map(at);
    const errorCounts = { ...result.errorCounts };
    const warningCounts = { ...result.warningCounts };
    for (const r of mapped.rejections) {
      errorCounts[r.code] = (errorCounts[r.code] ?? 0) + 1;
      if (errors.length < listed) errors.push(r);
    }
    for (const w of mapped.warnings) {
      warningCounts[w.code] = (warningCounts[w.code] ?? 0) + 1;
      if (warnings.length < listed) warnings.push(w);
    }
    errors.sort((a, b) => a.index - b.index);
    warnings.sort((a, b) => a.index - b.index);
    return {
      ...result,
      received: result.received + mapped.rejections.length,
      rejected: result.rejected + mapped.rejections.length,
      errors: errors as IngestResult['errors'],
      warnings: warnings as IngestResult['warnings'],
      errorCounts,
      warningCounts,
      acknowledged: mapped.acknowledged,
    };
  }
}
