import { Injectable } from '@nestjs/common';
import { ReadDatabase } from '@app/database/read-database';
import { withDriverTransaction } from '@app/database/driver-client';
import type { TestModeFilter } from '@app/common/reads/query-params';
import { microsLiteral, type CursorPosition } from '@app/common/reads/cursor';
import { EVENT_ROW_COLUMNS, type EventRow } from '@app/common/reads/event-record';
import { EVENT_COLUMN as c } from '@app/common/events/event-fields';

export interface EventFilters {
  eventName?: string;
  anonymousUserId?: string;
  sessionId?: string;
  /** Inclusive lower bound on the effective event time, epoch ms. */
  fromMs?: number;
  /** Exclusive upper bound on the effective event time, epoch ms. */
  toMs?: number;
  testMode: TestModeFilter;
}

@Injectable()
export class EventRepository {
  constructor(private readonly read: ReadDatabase) {}

  /**
   * One page of an app's events, newest first by (receivedAt, id), strictly after `after`.
   * The order matches the (app, receivedAt DESC, id DESC) indexes, and `from`/`to` bound
   * `ts`, the partition key, so PostgreSQL reads only the partitions they cover.
   */
  async page(
    appId: string,
    filters: EventFilters,
    after: CursorPosition | null,
    limit: number,
  ): Promise<EventRow[]> {
    const params: unknown[] = [appId];
    const where = [`${c.appId} = $1`];
    const add = (sql: string, value: unknown) => {
      params.push(value);
      where.push(sql.replace('?', `$${params.length}`));
    };
    if (filters.eventName !== undefined) add(`${c.eventName} = ?`, filters.eventName);
    if (filters.anonymousUserId !== undefined) add(`${c.anonymousUserId} = ?`, filters.anonymousUserId);
    if (filters.sessionId !== undefined) add(`${c.sessionId} = ?`, filters.sessionId);
    const filtered =
      filters.eventName !== undefined ||
      filters.anonymousUserId !== undefined ||
      filters.sessionId !== undefined;
    if (filtered) {
      // True of every row. The days ingest writes answer these three filters from a BRIN index
      // that also summarizes the receive time (src/storage/partition.repository.ts); naming the
      // column lets the planner see that the index follows the table's order and cost the
      // lookup as a read of the few matching ranges, not of the whole day, which would lose to
      // a scan of the app's rows.
      where.push(`${c.receivedAt} > '-infinity'::timestamptz`);
    }
    if (filters.fromMs !== undefined) add(`${c.timestamp} >= ?`, new Date(filters.fromMs).toISOString());
    if (filters.toMs !== undefined) add(`${c.timestamp} < ?`, new Date(filters.toMs).toISOString());
    if (filters.testMode !== 'all') add(`${c.isTestMode} = ?`, filters.testMode === 'true');
    if (after) {
      params.push(microsLiteral(after.receivedUs), after.id.toString());
      where.push(
        `(${c.receivedAt}, ${c.id}) < ($${params.length - 1}::timestamptz, $${params.length}::bigint)`,
      );
    }
    params.push(limit);
    // The ORDER BY names the table's columns: the bare `id` would be the text output column,
    // which sorts 100000 before 99999 and would not match the cursor's numeric comparison.
    const sql = `SELECT ${EVENT_ROW_COLUMNS}
         FROM events
        WHERE ${where.join(' AND ')}
        ORDER BY events.${c.receivedAt} DESC, events.${c.id} DESC
        LIMIT $${params.length}`;
    if (filtered) return (await this.read.run((db) => db.query(sql, params))) as EventRow[];
    // Without a filter the (app, receivedAt DESC, id DESC) index gives the page in order, and
    // reading it is always the right plan. But the days ingest writes are often not analyzed yet
    // (a new day's partition, a burst since the last autovacuum), and their estimate of a few
    // rows makes the planner fetch every row of the app and sort them instead: 25 ms for 16,000
    // rows, growing with the day, against 0.5 ms in order. So sorting is ruled out for this read.
    // The driver's client, so that a lost connection reaches the read route as raised and the
    // read goes to another server.
    return this.read.run((db) =>
      withDriverTransaction(
        db,
        'BEGIN; SET LOCAL enable_sort = off',
        async (client) => (await client.query(sql, params)).rows as EventRow[],
      ),
    );
  }
}
