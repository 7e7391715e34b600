import { Injectable } from '@nestjs/common';
import { ReadDatabase } from '@app/database/read-database';
import { withDriverClient } from '@app/database/driver-client';
import type { TestModeFilter } from '@app/common/reads/query-params';
import type { RollupPosition } from './rollup-cursor';

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
  /** The instant the row's day ended in its zone, epoch ms (day_end, stored by the computation). */
  dayEndMs: number;
  /** The IANA zone the row's day was computed in. */
  timezone: string;
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
  {
    // Rows computed before day_end existed are UTC days. The same expression as the index of
    // unfinalised rows.
    field: 'dayEndMs',
    sql: `floor(extract(epoch FROM COALESCE(day_end, (day + 1)::timestamp AT TIME ZONE 'UTC')) * 1000)::bigint`,
    bigint: true,
  },
  { field: 'timezone', sql: 'timezone' },
];

// One prepared statement for every filter combination: a null parameter means "no filter".
// The primary key (app_id, day, …) bounds the scan either way. Date ascending, the total row
// ('' sorts first under COLLATE "C"), then eventName, live before test. Rows come back as arrays,
// which the driver builds much faster than objects: a 30-day answer holds hundreds of rows.
// A page starts strictly after the cursor's (day, event_name, is_test_mode), in that same order,
// and holds at most $9 rows, so one read's memory is bounded whatever the app stored.
const LIST = `
SELECT ${LIST_COLUMNS.map((c) => c.sql).join(', ')}
  FROM rollups r
 WHERE app_id = $1 AND day BETWEEN $2::date AND $3::date
   AND ($4::text IS NULL OR event_name = $4::text)
   AND ($5::boolean IS NULL OR is_test_mode = $5::boolean)
   AND ($6::date IS NULL OR (r.day, r.event_name, r.is_test_mode) > ($6::date, $7::text, $8::boolean))
 ORDER BY r.day, r.event_name, r.is_test_mode
 LIMIT $9`;
const LIST_NAME = 'tally_rollups_list_v4';

type ListRow = unknown[];

function toRollupRow(values: ListRow): RollupRow {
  const row: Record<string, unknown> = {};
  LIST_COLUMNS.forEach((c, i) => {
    row[c.field] = c.bigint ? Number(values[i]) : values[i];
  });
  return row as unknown as RollupRow;
}

/** Reads of the `rollups` table for the read endpoint. */
@Injectable()
export class RollupRepository {
  constructor(private readonly read: ReadDatabase) {}

  /** At most `limit` rows of the app, strictly after `after` when given. */
  async list(
    appId: string,
    filters: RollupFilters,
    after: RollupPosition | null,
    limit: number,
  ): Promise<RollupRow[]> {
    const values = [
      appId,
      filters.fromDate,
      filters.toDate,
      filters.eventName ?? null,
      filters.testMode === 'all' ? null : filters.testMode === 'true',
      after?.day ?? null,
      after?.eventName ?? null,
      after?.isTestMode ?? null,
      limit,
    ];
    const rows = await this.read.run(async (db) => {
      // The driver's client, for a named (prepared) statement and array rows.
      return withDriverClient(db, async (client) => {
        const result = await client.query<ListRow>({ name: LIST_NAME, text: LIST, values, rowMode: 'array' });
        return result.rows;
      });
    });
    return rows.map(toRollupRow);
  }

  /** The zone the app's served rollups are in (its days, "today"); UTC for an unknown app. */
  async servedZone(appId: string): Promise<string> {
    const rows = (await this.read.run((db) =>
      db.query(`SELECT rollup_timezone AS zone FROM apps WHERE id = $1`, [appId]),
    )) as { zone: string }[];
    return rows[0]?.zone ?? 'UTC';
  }
}
