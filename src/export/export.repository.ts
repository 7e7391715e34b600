import { Injectable } from '@nestjs/common';
import { ReadDatabase } from '@app/database/read-database';
import { EVENT_ROW_COLUMNS, type EventRow } from '@app/common/reads/event-record';
import type { TestModeFilter } from '@app/common/reads/query-params';

/** A position in an export: the receive time (epoch microseconds) and stored id of a row. */
export interface ExportPosition {
  receivedUs: bigint;
  id: bigint;
}

/** What an export reads: one app's events received in [fromMs, toMs). */
export interface ExportWindow {
  appId: string;
  fromMs: number;
  toMs: number;
  testMode: TestModeFilter;
}

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * The export's reads. They go through ReadDatabase, as GET /api/v1/events does: the read pool,
 * its READ_STATEMENT_TIMEOUT_MS (per chunk: each chunk is one statement), no parallel workers,
 * and the replica when one is configured and healthy.
 */
@Injectable()
export class ExportRepository {
  constructor(private readonly read: ReadDatabase) {}

  /**
   * The next `limit` rows of the window strictly after `after`, ascending by (received_at, id).
   * No bound on `ts`, the partition key: a late event sits in the partition of its event-time
   * day, so every partition may hold rows of the window. Each partition answers from its
   * (app_id, received_at DESC, id DESC) index, read backwards, and PostgreSQL merges them in
   * order; a partition with nothing in the window costs one index descent. The position is in
   * microseconds, as stored, so paging is exact whatever the precision of received_at.
   */
  async chunk(window: ExportWindow, after: ExportPosition | null, limit: number): Promise<EventRow[]> {
    const params: unknown[] = [window.appId, iso(window.fromMs), iso(window.toMs)];
    const where = ['app_id = $1', 'received_at >= $2::timestamptz', 'received_at < $3::timestamptz'];
    if (window.testMode !== 'all') {
      params.push(window.testMode === 'true');
      where.push(`is_test_mode = $${params.length}`);
    }
    if (after) {
      params.push(after.receivedUs.toString(), after.id.toString());
      where.push(
        `(received_at, id) > (timestamptz 'epoch' + $${params.length - 1}::bigint * interval '1 microsecond', $${params.length}::bigint)`,
      );
    }
    params.push(limit);
    // One statement per chunk: on a replica connection error it is simply read again from the primary.
    return (await this.read.run((db) =>
      db.query(
        `SELECT ${EVENT_ROW_COLUMNS}
           FROM events
          WHERE ${where.join(' AND ')}
          ORDER BY events.received_at, events.id
          LIMIT $${params.length}`,
        params,
      ),
    )) as EventRow[];
  }
}
