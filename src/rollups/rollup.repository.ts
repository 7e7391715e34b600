import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { READ_DATA_SOURCE } from '@app/database/database.module';
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

// One prepared statement for every filter combination: a null parameter means "no filter".
// The primary key (app_id, day, …) bounds the scan either way. Date ascending, the total row
// ('' sorts first under COLLATE "C"), then eventName, live before test. Rows come back as arrays,
// which the driver builds much faster than objects: a 30-day answer holds hundreds of rows.
const LIST = `
SELECT day::text, is_test_mode, event_name, events, unique_users, unique_sessions, fv_count,
       fv_sum, fv_min, fv_max, floor(extract(epoch FROM computed_at) * 1000)::bigint
  FROM rollups r
 WHERE app_id = $1 AND day BETWEEN $2::date AND $3::date
   AND ($4::text IS NULL OR event_name = $4::text)
   AND ($5::boolean IS NULL OR is_test_mode = $5::boolean)
 ORDER BY r.day, r.event_name, r.is_test_mode`;
const LIST_NAME = 'tally_rollups_list_v1';

type ListRow = [
  day: string,
  isTestMode: boolean,
  eventName: string,
  events: string,
  uniqueUsers: string,
  uniqueSessions: string,
  fvCount: string,
  fvSum: number | null,
  fvMin: number | null,
  fvMax: number | null,
  computedMs: string,
];

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
  constructor(@InjectDataSource(READ_DATA_SOURCE) private readonly db: DataSource) {}

  async list(appId: string, filters: RollupFilters): Promise<RollupRow[]> {
    const values = [
      appId,
      filters.fromDate,
      filters.toDate,
      filters.eventName ?? null,
      filters.testMode === 'all' ? null : filters.testMode === 'true',
    ];
    // The driver's client directly, for a named (prepared) statement and array rows.
    const runner = this.db.createQueryRunner();
    let rows: ListRow[];
    try {
      const client = (await runner.connect()) as PgClient;
      rows = (await client.query({ name: LIST_NAME, text: LIST, values, rowMode: 'array' })).rows;
    } finally {
      await runner.release();
    }
    return rows.map((r) => ({
      day: r[0],
      isTestMode: r[1],
      eventName: r[2],
      events: Number(r[3]),
      uniqueUsers: Number(r[4]),
      uniqueSessions: Number(r[5]),
      fvCount: Number(r[6]),
      fvSum: r[7],
      fvMin: r[8],
      fvMax: r[9],
      computedMs: Number(r[10]),
    }));
  }
}
