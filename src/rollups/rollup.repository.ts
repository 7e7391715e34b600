import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { READ_DATA_SOURCE } from '@app/database/database.module';
import type { TestModeFilter } from '@app/events/list-events-query.dto';

export interface RollupFilters {
  /** First and last UTC day, inclusive, `YYYY-MM-DD`. */
  fromDate: string;
  toDate: string;
  eventName?: string;
  testMode: TestModeFilter;
}

/** A stored rollup row (bigints as strings). `event_name` '' is the app-wide total row. */
export interface RollupRow {
  app_id: string;
  day: string;
  is_test_mode: boolean;
  event_name: string;
  events: string;
  unique_users: string;
  unique_sessions: string;
  fv_count: string;
  fv_sum: number | null;
  fv_min: number | null;
  fv_max: number | null;
  computed_ms: string;
  final: boolean;
}

/** Reads of the `rollups` table for the read endpoint. */
@Injectable()
export class RollupRepository {
  constructor(@InjectDataSource(READ_DATA_SOURCE) private readonly db: DataSource) {}

  /** Date ascending, the total row ('' sorts first under COLLATE "C"), then eventName, live before test. */
  async list(appId: string, filters: RollupFilters): Promise<RollupRow[]> {
    const params: unknown[] = [appId, filters.fromDate, filters.toDate];
    const where = ['app_id = $1', 'day BETWEEN $2::date AND $3::date'];
    if (filters.eventName !== undefined) {
      params.push(filters.eventName);
      where.push(`event_name = $${params.length}`);
    }
    if (filters.testMode !== 'all') {
      params.push(filters.testMode === 'true');
      where.push(`is_test_mode = $${params.length}`);
    }
    return (await this.db.query(
      `SELECT app_id, day::text AS day, is_test_mode, event_name,
              events::text AS events, unique_users::text AS unique_users,
              unique_sessions::text AS unique_sessions, fv_count::text AS fv_count,
              fv_sum, fv_min, fv_max,
              floor(extract(epoch FROM computed_at) * 1000)::bigint::text AS computed_ms,
              computed_at >= ((day + 1)::timestamp AT TIME ZONE 'UTC') AS final
         FROM rollups
        WHERE ${where.join(' AND ')}
        ORDER BY day, event_name, is_test_mode`,
      params,
    )) as RollupRow[];
  }
}
