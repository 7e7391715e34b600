import { Inject, Injectable } from '@nestjs/common';
import { decodeCursor, encodeCursor } from '@app/common/reads/cursor';
import { CursorSecretRepository } from '@app/common/reads/cursor-secret.repository';
import { cursorPosition } from '@app/common/reads/signed-cursor';
import { toEventRecord } from '@app/common/reads/event-record';
import { DAY_MS, utcDateString } from '@app/common/time';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import type { EntityManager } from 'typeorm';
import type { CursorPosition } from '@app/common/reads/cursor';
import type { Rejection } from './plan-gate';
import type { QuarantineRecord } from './quarantine.dto';
import { QuarantineRepository } from './quarantine.repository';
import type { QuarantineEvent, QuarantineFilters, QuarantineRow, ReplayRow } from './quarantine.types';

export interface QuarantinePage {
  events: QuarantineRecord[];
  nextCursor: string | null;
}

/** A quarantined event as answers show it: its event record (the id opaque), code and violations. */
export function toQuarantineRecord(secret: Buffer, row: QuarantineRow): QuarantineRecord {
  return { ...toEventRecord(secret, row), code: row.code, violations: row.violations };
}

/** An app's UTC receive day under one daily bound, as QuarantineService.fullDays keys it. */
function fullDay(receivedAt: number, maxPerDay: number): string {
  return `${utcDateString(receivedAt)}/${maxPerDay}`;
}

/**
 * The quarantine: keeping rejected events within the app's daily bound, reading them, the
 * replay's chunks, erasure, and the upkeep of its daily partitions (run by QuarantineMaintenanceJob).
 */
@Injectable()
export class QuarantineService {
  /** The latest UTC day found full per app, with the bound it was full under (fullDay). */
  private readonly fullDays = new Map<string, string>();

  constructor(
    private readonly quarantine: QuarantineRepository,
    @Inject(APP_CONFIG) private readonly config: ConfigSlice<'quarantineDays'>,
    private readonly secrets: CursorSecretRepository,
  ) {}

  /** Newest first, with the events' cursor (bound to the app and the filters). */
  async list(appId: string, filters: QuarantineFilters, cursor: string | undefined, limit: number) {
    const binding = JSON.stringify(['quarantine', appId, filters.eventName ?? null, filters.code ?? null]);
    const secret = await this.secrets.cursorSecret();
    const after = cursorPosition(cursor, (token) => decodeCursor(secret, appId, binding, token));
    const rows = await this.quarantine.page(appId, filters, after, limit + 1);
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    const nextCursor =
      rows.length > limit
        ? encodeCursor(secret, appId, binding, { receivedUs: BigInt(last.receivedAt), id: BigInt(last.id) })
        : null;
    return {
      events: page.map((row) => toQuarantineRecord(secret, row)),
      nextCursor,
    } satisfies QuarantinePage;
  }

  /**
   * Keeps rejected events within the app's daily bound (`maxPerDay`); returns how many were kept
   * (the first ones of `rejected`). A day this instance found full is not asked again.
   */
  async keep<E extends QuarantineEvent>(
    appId: string,
    receivedAt: number,
    rejected: Rejection<E>[],
    maxPerDay: number,
  ): Promise<number> {
    if (!rejected.length || this.isFull(appId, receivedAt, maxPerDay)) return 0;
    const kept = await this.quarantine.insert(appId, receivedAt, rejected, maxPerDay);
    if (kept < rejected.length) this.fullDays.set(appId, fullDay(receivedAt, maxPerDay));
    return kept;
  }

  /**
   * Whether the app's UTC receive day is known to have no room left under `maxPerDay`. A day's
   * count of kept events only grows (replays and erasure do not give room back), so once an
   * insert found it full, it stays full until the day ends: the requests of a key whose every
   * event is rejected then skip the quarantine's transaction, and ingest skips building the
   * records it would not keep.
   */
  isFull(appId: string, receivedAt: number, maxPerDay: number): boolean {
    return this.fullDays.get(appId) === fullDay(receivedAt, maxPerDay);
  }

  /**
   * One replay chunk in one transaction: the next `limit` rows after `after` (rows another replay
   * holds are skipped), handed to `claimed` at once; then `fn`, whose `remove` ids leave the
   * quarantine in the same transaction.
   */
  replayChunk<T>(
    appId: string,
    filters: QuarantineFilters,
    after: CursorPosition | null,
    limit: number,
    claimed: (rows: ReplayRow[]) => void,
    fn: (rows: ReplayRow[], manager: EntityManager) => Promise<{ remove: string[]; result: T }>,
  ): Promise<T> {
    return this.quarantine.withChunk(appId, filters, after, limit, claimed, fn);
  }

  /** Erasure: deletes the quarantined events of these users of the app; returns how many. */
  deleteUsers(appId: string, anonymousUserIds: string[]): Promise<number> {
    return this.quarantine.deleteUsers(appId, anonymousUserIds);
  }

  /** Creates the partitions of today and the next two days; drops those past QUARANTINE_DAYS. */
  async maintain(now: number): Promise<{ dropped: string[] }> {
    const existing = await this.quarantine.partitions();
    const days = new Set(existing.map((p) => p.day));
    for (let d = 0; d < 3; d++) {
      const day = utcDateString(now + d * DAY_MS);
      if (!days.has(day)) await this.quarantine.createPartition(day, utcDateString(now + (d + 1) * DAY_MS));
    }
    const cutoff = utcDateString(now - this.config.quarantineDays * DAY_MS);
    const dropped: string[] = [];
    for (const p of existing) {
      if (p.day < cutoff) {
        await this.quarantine.dropPartition(p.name);
        dropped.push(p.name);
      }
    }
    await this.quarantine.forgetDaysBefore(cutoff);
    return { dropped };
  }
}
