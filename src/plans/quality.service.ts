import { Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { Interval } from '@nestjs/schedule';
import { utcDateString } from '@app/common/time';
import type { PlanGate } from './plan-gate';
import type { PlannedEvent } from './plan.types';
import { CursorSecretRepository } from '@app/common/reads/cursor-secret.repository';
import { cursorPosition, openCursor, signCursor } from '@app/common/reads/signed-cursor';
import { QualityPosition, QualityRepository, QualityRow, RuleRow } from './quality.repository';

/** How often an instance adds its data-quality counts to the database. */
export const QUALITY_FLUSH_MS = 5_000;
const TOP_RULES = 5;

/** One page of the summary, and the cursor of the next one (null on the last page). */
export interface QualityPage {
  rows: EventQuality[];
  nextCursor: string | null;
}

// A cursor's body: the last row's score (8 bytes) and its event name (at most 800 bytes of UTF-8).
const SCORE_BYTES = 8;
const MAX_CURSOR_BODY = SCORE_BYTES + 800;

function encodePosition(secret: Buffer, binding: string, p: QualityPosition): string {
  const name = Buffer.from(p.eventName, 'utf8');
  const body = Buffer.alloc(SCORE_BYTES + name.length);
  body.writeBigInt64BE(p.score, 0);
  name.copy(body, SCORE_BYTES);
  return signCursor(secret, binding, body);
}

function decodePosition(secret: Buffer, binding: string, token: string): QualityPosition | null {
  const body = openCursor(secret, binding, token, MAX_CURSOR_BODY);
  if (body === null || body.length < SCORE_BYTES) return null;
  return { score: body.readBigInt64BE(0), eventName: body.subarray(SCORE_BYTES).toString('utf8') };
}

export interface EventQuality {
  eventName: string;
  accepted: number;
  flagged: number;
  rejected: number;
  topRules: { field: string; rule: string; count: number }[];
}

/**
 * The data-quality counts of tracking plans. Ingest adds each request's tally in memory (a few
 * map operations per event name); every QUALITY_FLUSH_MS the instance adds them to the daily rows
 * in one statement, and on shutdown. A crash loses at most the last interval's counts: these
 * figures guide the rollout of a plan, they are not billing.
 */
@Injectable()
export class QualityService implements OnApplicationShutdown {
  private readonly logger = new Logger('PlanQuality');
  /** Per `app|day`, the rows by event name. */
  private quality = new Map<string, Map<string, QualityRow>>();
  private rules = new Map<string, RuleRow>();

  constructor(
    private readonly repository: QualityRepository,
    private readonly secrets: CursorSecretRepository,
  ) {}

  @Interval('plan-quality-flush', QUALITY_FLUSH_MS)
  async scheduledFlush(): Promise<void> {
    await this.flush().catch((err: Error) =>
      this.logger.warn(`adding the data-quality counts failed: ${err.message}`),
    );
  }

  async onApplicationShutdown(): Promise<void> {
    await this.flush().catch(() => undefined);
  }

  /** Adds one request's counts (the plan gate's tally). */
  add(appId: string, receivedAt: number, gate: Pick<PlanGate<PlannedEvent>, 'forEachTally'>): void {
    const day = utcDateString(receivedAt);
    const bucket = `${appId}|${day}`;
    let quality = this.quality.get(bucket);
    if (quality === undefined) this.quality.set(bucket, (quality = new Map()));
    gate.forEachTally((eventName, accepted, flagged, rejected, rules) => {
      let row = quality.get(eventName);
      if (row === undefined)
        quality.set(eventName, (row = { appId, day, eventName, accepted: 0, flagged: 0, rejected: 0 }));
      row.accepted += accepted;
      row.flagged += flagged;
      row.rejected += rejected;
      if (rules !== null && rules.size > 0) this.addRules(appId, day, eventName, rules);
    });
  }

  private addRules(appId: string, day: string, eventName: string, rules: ReadonlyMap<string, number>): void {
    for (const [fieldRule, n] of rules) {
      const ruleKey = `${appId}|${day}|${eventName}|${fieldRule}`;
      let r = this.rules.get(ruleKey);
      if (!r) {
        const [field, rule] = fieldRule.split('\u0000');
        this.rules.set(ruleKey, (r = { appId, day, eventName, field, rule, violations: 0 }));
      }
      r.violations += n;
    }
  }

  /** Writes the counts gathered so far. */
  async flush(): Promise<void> {
    const quality = [...this.quality.values()].flatMap((rows) => [...rows.values()]);
    const rules = [...this.rules.values()];
    this.quality = new Map();
    this.rules = new Map();
    await this.repository.add(quality, rules);
  }

  /**
   * Per event name over [fromDay, toDay]: accepted, flagged and rejected events and the top rules
   * broken; most rejected and flagged first, at most `limit` names a page. The cursor is bound to
   * the app and the range.
   */
  async summary(
    appId: string,
    fromDay: string,
    toDay: string,
    cursor: string | undefined,
    limit: number,
  ): Promise<QualityPage> {
    const binding = JSON.stringify(['plan-quality', appId, fromDay, toDay]);
    const secret = await this.secrets.cursorSecret();
    const after = cursorPosition(cursor, (token) => decodePosition(secret, binding, token));
    // This instance's latest counts first, so that a reader sees its own traffic at once.
    await this.flush();
    const found = await this.repository.summary(appId, fromDay, toDay, TOP_RULES, after, limit + 1);
    const page = found.slice(0, limit);
    const last = page[page.length - 1];
    const nextCursor =
      found.length > limit
        ? encodePosition(secret, binding, { score: BigInt(last.score), eventName: last.event_name })
        : null;
    const rows = page.map((r) => ({
      eventName: r.event_name,
      accepted: Number(r.accepted),
      flagged: Number(r.flagged),
      rejected: Number(r.rejected),
      topRules: r.rules ?? [],
    }));
    return { rows, nextCursor };
  }
}
