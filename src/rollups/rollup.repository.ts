import { Injectable } from '@nestjs/common';
import { ReadDatabase } from '@app/database/read-database';
import type { TestModeFilter } from '@app/common/reads/query-params';

export interface RollupFilters {
  /** First and last UTC day, inclusive, `YYYY-MM-DD`. */
  fromDate: string;
  toDate: string;
  eventName?: string;
  testMode: TestModeFilter;
}

/** A stored rollup row. `eventName` '' is the app-wide total row. */
export interface RollupRow {
  day: string;
  isTestMode: boolean;
  eventName: string;
  events: number;
  uniqueUsers: number;
  uniqueSessions: number;
  fvCount: number;
  fvSum: number | null;
  fvMin: number | null;
  fvMax: number | null;
  /** computed_at in epoch ms. */
  computedMs: number;
}

// The columns of a list row, in select order. bigint and count columns arrive as strings.
const LIST_COLUMNS: readonly { field: keyof RollupRow; sql: string; bigint?: true }[] = [
  { field: 'day', sql: 'day::text' },
  { field: 'isTestMode', sql: 'is_test_mode' },
  { field: 'eventName', sql: 'event_name' },
  { field: 'events', sql: 'events', bigint: true },
  { field: 'uniqueUsers', sql: 'unique_users', bigint: true },
  { field: 'uniqueSessions', sql: 'unique_sessions', bigint: true },
  { field: 'fvCount', sql: 'fv_count', bigint: true },
  { field: 'fvSum', sql: 'fv_sum' },
  { field: 'fvMin', sql: 'fv_min' },
  { field: 'fvMax', sql: 'fv_max' },
  { field: 'computedMs', sql: 'floor(extract(epoch FROM computed_at) * 1000)::bigint', bigint: true },
];

// One prepared statement for every filter combination: a null parameter means "no filter".
// The primary key (app_id, day, …) bounds the scan either way. Date ascending, the total row
// ('' sorts first under COLLATE "C"), then eventName, live before test. Rows come back as arrays,
// which the driver builds much faster than objects: a 30-day answer holds hundreds of rows.
const LIST = `
SELECT ${LIST_COLUMNS.map((c) => c.sql).join(', ')}
  FROM rollups r
 WHERE app_id = $1 AND day BETWEEN $2::date AND $3::date
   AND ($4::text IS NULL OR event_name = $4::text)
   AND ($5::boolean IS NULL OR is_test_mode = $5::boolean)
 ORDER BY r.day, r.event_name, r.is_test_mode`;
const LIST_NAME = 'tally_rollups_list_v1';

type ListRow = unknown[];

function toRollupRow(values: ListRow): RollupRow {
  const row: Record<string, unknown> = {};
  LIST_COLUMNS.forEach((c, i) => {
    row[c.field] = c.bigint ? Number(values[i]) : values[i];
  });
  return row as unknown as RollupRow;
}

interface PgClient {
  query(config: {
    name: string;
    text: string;
    values: unknown[];
    rowMode: 'array';
  }): Promise<{ rows: ListRow[] }>;
}

/** Reads of the `rollups` table for the read endpoint. */
@Injectable()
export class RollupRepository {
  constructor(private readonly read: ReadDatabase) {}

  async list(appId: string, filters: RollupFilters): Promise<RollupRow[]> {
    const values = [
      appId,
      filters.fromDate,
      filters.toDate,
      filters.eventName ?? null,
      filters.testMode === 'all' ? null : filters.testMode === 'true',
    ];
    const rows = await this.read.run(async (db) => {
      // The driver's client directly, for a named (prepared) statement and array rows.
      const runner = db.createQueryRunner();
      try {
        const client = (await runner.connect()) as PgClient;
        return (await client.query({ name: LIST_NAME, text: LIST, values, rowMode: 'array' })).rows;
      } finally {
        await runner.release();
      }
    });
    return rows.map(toRollupRow);
  }
}
