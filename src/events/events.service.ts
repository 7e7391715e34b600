import { Injectable } from '@nestjs/common';
import { normaliseAppId } from '@app/common/ids';
import { invalidQuery } from '@app/common/query-validation.pipe';
import { decodeCursor, encodeCursor } from '@app/common/reads/cursor';
import { EventFilters, EventRepository } from './event.repository';
import type { EventRecordDto } from '@app/common/reads/event-record.dto';
import { toEventRecord } from '@app/common/reads/event-record';
import { DEFAULT_LIMIT, ListEventsQueryDto } from './list-events-query.dto';
import { parseInstant } from '@app/common/reads/time-params';
import { CursorSecretRepository } from '@app/common/reads/cursor-secret.repository';
import { cursorPosition } from '@app/common/reads/signed-cursor';

export interface EventsPage {
  events: EventRecordDto[];
  /** Cursor of the next page, or null on the last one. */
  nextCursor: string | null;
}

@Injectable()
export class EventsService {
  constructor(
    private readonly events: EventRepository,
    private readonly secrets: CursorSecretRepository,
  ) {}

  async list(query: ListEventsQueryDto): Promise<EventsPage> {
    const appId = normaliseAppId(query.appId);
    const filters: EventFilters = {
      eventName: query.eventName,
      anonymousUserId: query.anonymousUserId,
      sessionId: query.sessionId,
      fromMs: query.from === undefined ? undefined : parseInstant(query.from)!,
      toMs: query.to === undefined ? undefined : parseInstant(query.to)!,
      testMode: query.testMode ?? 'false',
    };
    if (filters.fromMs !== undefined && filters.toMs !== undefined && filters.fromMs > filters.toMs) {
      throw invalidQuery([{ field: 'from', code: 'invalid_range', message: 'from must not be after to' }]);
    }
    // The cursor is bound to the app and every filter, so it cannot be replayed on another query.
    const binding = JSON.stringify([
      appId,
      filters.eventName ?? null,
      filters.anonymousUserId ?? null,
      filters.sessionId ?? null,
      filters.fromMs ?? null,
      filters.toMs ?? null,
      filters.testMode,
    ]);
    const secret = await this.secrets.cursorSecret();
    const after = cursorPosition(query.cursor, (token) => decodeCursor(secret, appId, binding, token));
    const limit = query.limit ?? DEFAULT_LIMIT;
    const rows = await this.events.page(appId, filters, after, limit + 1);
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    const nextCursor =
      rows.length > limit
        ? encodeCursor(secret, appId, binding, { receivedUs: BigInt(last.receivedAt), id: BigInt(last.id) })
        : null;
    return { events: page.map((row) => toEventRecord(secret, row)), nextCursor };
  }
}
