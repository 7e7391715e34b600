import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { microsLiteral, type CursorPosition } from '@app/common/reads/cursor';
import type { Rejection } from './plan-gate';
import type { QuarantineEvent, QuarantineFilters, QuarantineRow, ReplayRow } from './quarantine.types';

const PARTITION_NAME = /^quarantine_p(\d{4})(\d{2})(\d{2})$/;

const COLUMNS = `id::text AS id, app_id, (extract(epoch FROM received_at) * 1000000)::bigint::text AS received_us,
  floor(extract(epoch FROM ts) * 1000)::bigint::text AS ts_ms, event_time::text AS event_time, event_name,
  event_id, anonymous_user_id, session_id, is_test_mode, platform, app_version, build_number, os_version,
  device_model, locale, timezone, float_value, payload_json AS payload, code, violations`;

// What a replay reads of a quarantined event: ingest's fields under ingest's names, so that the
// driver's rows are used as they come, and not the violations (the replay checks again).
const REPLAY_COLUMNS = `id::text AS id, (extract(epoch FROM received_at) * 1000000)::bigint::text AS "receivedUs",
  floor(extract(epoch FROM ts) * 1000)::float8 AS ts, event_time::float8 AS "eventTime", event_name AS "eventName",
  event_id AS "eventId", anonymous_user_id AS "anonymousUserId", session_id AS "sessionId",
  is_test_mode AS "isTestMode", platform, app_version AS "appVersion", build_number AS "buildNumber",
  os_version AS "osVersion", device_model AS "deviceModel", locale, timezone, float_value AS "floatValue",
  payload_json AS payload`;

interface Row {
  id: string;
  app_id: string;
  received_us: string;
  ts_ms: string;
  event_time: string | null;
  event_name: string;
  event_id: string | null;
  anonymous_user_id: string | null;
  session_id: string | null;
  is_test_mode: boolean;
  platform: string | null;
  app_version: string | null;
  build_number: string | null;
  os_version: string | null;
  device_model: string | null;
  locale: string | null;
  timezone: string | null;
  float_value: number | null;
  payload: QuarantineEvent['payload'];
  code: QuarantineRow['code'];
  violations: QuarantineRow['violations'];
}

function toRow(r: Row): QuarantineRow {
  return {
    id: r.id,
    appId: r.app_id,
    receivedUs: BigInt(r.received_us),
    ts: Number(r.ts_ms),
    eventTime: r.event_time === null ? null : Number(r.event_time),
    eventName: r.event_name,
    eventId: r.event_id,
    anonymousUserId: r.anonymous_user_id,
    sessionId: r.session_id,
    isTestMode: r.is_test_mode,
    platform: r.platform,
    appVersion: r.app_version,
    buildNumber: r.build_number,
    osVersion: r.os_version,
    deviceModel: r.device_model,
    locale: r.locale,
    timezone: r.timezone,
    floatValue: r.float_value,
    payload: r.payload,
    code: r.code,
    violations: r.violations,
  };
}

/** WHERE clauses for an app, the filters and a position (newest first, or oldest first). */
function whereOf(
  appId: string,
  filters: QuarantineFilters,
  after: CursorPosition | null,
  newestFirst: boolean,
) {
  const params: unknown[] = [appId];
  const where = ['app_id = $1'];
  if (filters.eventName !== undefined) where.push(`event_name = $${params.push(filters.eventName)}`);
  if (filters.code !== undefined) where.push(`code = $${params.push(filters.code)}`);
  if (filters.replayable) where.push(`code IN ('schema_violation', 'unplanned_event')`);
  if (after) {
    const op = newestFirst ? '<' : '>';
    params.push(microsLiteral(after.receivedUs), after.id.toString());
    where.push(`(received_at, id) ${op} ($${params.length - 1}::timestamptz, $${params.length}::bigint)`);
  }
  return { params, where: where.join(' AND ') };
}

/**
 * The quarantine: events a tracking plan rejected under `enforce`, kept as they would have been
 * stored, in daily partitions of their receive time. The only code with SQL on `quarantine`;
 * nothing that reads events, rollups or exports touches it.
 */
@Injectable()
export class QuarantineRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /**
   * Stores the rejected events of one request, as many as the app's UTC receive day still has
   * room for under `maxPerDay`; returns how many were kept (the first ones of `rejected`). The
   * room is claimed in the day's row, which stays locked until the events are in, so that
   * concurrent requests of the app never keep more than the bound between them.
   */
  async insert(
    appId: string,
    receivedAt: number,
    rejected: Rejection<QuarantineEvent>[],
    maxPerDay: number,
  ): Promise<number> {
    if (!rejected.length) return 0;
    return this.db.transaction(async (manager) => {
      const [claim] = (await manager.query(
        `INSERT INTO quarantine_days AS d (app_id, day, kept, last_taken)
         VALUES ($1, (to_timestamp($2::float8 / 1000) AT TIME ZONE 'UTC')::date,
                 LEAST($3::bigint, $4::bigint), LEAST($3::bigint, $4::bigint)::int)
         ON CONFLICT (app_id, day) DO UPDATE
           SET kept = LEAST(d.kept + $3::bigint, GREATEST(d.kept, $4::bigint)),
               last_taken = (LEAST(d.kept + $3::bigint, GREATEST(d.kept, $4::bigint)) - d.kept)::int
         RETURNING last_taken`,
        [appId, receivedAt, rejected.length, maxPerDay],
      )) as { last_taken: number }[];
      const taken = claim.last_taken;
      if (taken > 0) await this.insertRows(manager, appId, receivedAt, rejected.slice(0, taken));
      return taken;
    });
  }

  private async insertRows(
    manager: EntityManager,
    appId: string,
    receivedAt: number,
    rejected: Rejection<QuarantineEvent>[],
  ): Promise<void> {
    const rows = rejected.map(({ event: e, code, violations }) => ({
      ts: e.ts,
      event_time: e.eventTime,
      event_name: e.eventName,
      event_id: e.eventId,
      anonymous_user_id: e.anonymousUserId,
      session_id: e.sessionId,
      is_test_mode: e.isTestMode,
      platform: e.platform,
      app_version: e.appVersion,
      build_number: e.buildNumber,
      os_version: e.osVersion,
      device_model: e.deviceModel,
      locale: e.locale,
      timezone: e.timezone,
      float_value: e.floatValue,
      payload: e.payload,
      code,
      violations,
    }));
    await manager.query(
      `INSERT INTO quarantine (app_id, received_at, ts, event_time, event_name, event_id, anonymous_user_id,
                               session_id, is_test_mode, platform, app_version, build_number, os_version,
                               device_model, locale, timezone, float_value, payload_json, code, violations)
       SELECT $1, to_timestamp($2::float8 / 1000), to_timestamp(r.ts::float8 / 1000), r.event_time, r.event_name,
              r.event_id, r.anonymous_user_id, r.session_id, r.is_test_mode, r.platform, r.app_version,
              r.build_number, r.os_version, r.device_model, r.locale, r.timezone, r.float_value, r.payload,
              r.code, r.violations
         FROM json_to_recordset($3::json) AS r(ts bigint, event_time bigint, event_name text, event_id text,
              anonymous_user_id text, session_id text, is_test_mode boolean, platform text, app_version text,
              build_number text, os_version text, device_model text, locale text, timezone text,
              float_value float8, payload json, code text, violations jsonb)`,
      [appId, receivedAt, JSON.stringify(rows)],
    );
  }

  /** Forgets the per-day counts of days before `day` (`YYYY-MM-DD`), whose partitions are gone. */
  async forgetDaysBefore(day: string): Promise<void> {
    await this.db.query(`DELETE FROM quarantine_days WHERE day < $1::date`, [day]);
  }

  /** One page of an app's quarantine, newest first by (received_at, id), strictly after `after`. */
  async page(appId: string, filters: QuarantineFilters, after: CursorPosition | null, limit: number) {
    const { params, where } = whereOf(appId, filters, after, true);
    params.push(limit);
    const rows = (await this.db.query(
      `SELECT ${COLUMNS} FROM quarantine WHERE ${where}
        ORDER BY quarantine.received_at DESC, quarantine.id DESC LIMIT $${params.length}`,
      params,
    )) as Row[];
    return rows.map(toRow);
  }

  /**
   * One replay chunk, in one transaction: locks the next `limit` rows after `after`, oldest
   * first (rows another transaction holds are skipped, so a concurrent replay never sees them),
   * and hands them to `claimed` at once, so that the caller may open the next chunk while this
   * one is processed. Then runs `fn`, deletes the rows whose ids it returns, and commits.
   */
  async withChunk<T>(
    appId: string,
    filters: QuarantineFilters,
    after: CursorPosition | null,
    limit: number,
    claimed: (rows: ReplayRow[]) => void,
    fn: (rows: ReplayRow[], manager: EntityManager) => Promise<{ remove: string[]; result: T }>,
  ): Promise<T> {
    return this.db.transaction(async (manager) => {
      // The rows in index order, never a sort of all the app's rows per chunk: a partition filled
      // since the last ANALYZE looks nearly empty to the planner, which then sorts everything.
      await manager.query(`SET LOCAL enable_sort = off`);
      const { params, where } = whereOf(appId, filters, after, false);
      params.push(limit);
      const rows = (await manager.query(
        `SELECT ${REPLAY_COLUMNS} FROM quarantine WHERE ${where}
          ORDER BY quarantine.received_at, quarantine.id LIMIT $${params.length}
          FOR UPDATE SKIP LOCKED`,
        params,
      )) as ReplayRow[];
      claimed(rows);
      const { remove, result } = await fn(rows, manager);
      if (remove.length) {
        // The chunk is ordered by (received_at, id): its first and last rows bound the partition
        // range to search, and the ids (one sequence for the whole table) name the rows.
        await manager.query(
          `DELETE FROM quarantine WHERE app_id = $1 AND received_at BETWEEN $2::timestamptz AND $3::timestamptz
              AND id = ANY($4::bigint[])`,
          [
            appId,
            microsLiteral(BigInt(rows[0].receivedUs)),
            microsLiteral(BigInt(rows[rows.length - 1].receivedUs)),
            // Decimal ids need no quoting: one array literal, not the driver's escaping per element.
            `{${remove.join(',')}}`,
          ],
        );
      }
      return result;
    });
  }

  /** Deletes the quarantined events of these users of the app (erasure); returns how many. */
  async deleteUsers(appId: string, anonymousUserIds: string[], manager?: EntityManager): Promise<number> {
    if (!anonymousUserIds.length) return 0;
    const rows = (await (manager ?? this.db.manager).query(
      `WITH gone AS (DELETE FROM quarantine WHERE app_id = $1 AND anonymous_user_id = ANY($2::text[]) RETURNING 1)
       SELECT count(*)::int AS n FROM gone`,
      [appId, anonymousUserIds],
    )) as { n: number }[];
    return rows[0].n;
  }

  /** The days that have a partition, as `YYYY-MM-DD`, with the partition's name. */
  async partitions(): Promise<{ name: string; day: string }[]> {
    const rows = (await this.db.query(
      `SELECT c.relname AS name FROM pg_inherits i
         JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
        WHERE p.relname = 'quarantine'`,
    )) as { name: string }[];
    return rows.flatMap(({ name }) => {
      const m = PARTITION_NAME.exec(name);
      return m ? [{ name, day: `${m[1]}-${m[2]}-${m[3]}` }] : [];
    });
  }

  /** Creates the partition of one UTC day (`YYYY-MM-DD`) if missing; safe to race. */
  async createPartition(day: string, nextDay: string): Promise<void> {
    const name = `quarantine_p${day.replace(/-/g, '')}`;
    try {
      await this.db.query(
        `CREATE TABLE IF NOT EXISTS ${name} PARTITION OF quarantine
           FOR VALUES FROM ('${day} 00:00:00+00') TO ('${nextDay} 00:00:00+00')`,
      );
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code !== '42P07' && code !== '23505') throw err;
    }
  }

  async dropPartition(name: string): Promise<void> {
    if (!PARTITION_NAME.test(name)) throw new Error(`not a quarantine partition: ${name}`);
    await this.db.query(`DROP TABLE IF EXISTS ${name}`);
  }
}
