import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { microsLiteral, type CursorPosition } from '@app/common/reads/cursor';
import type { Rejection } from './plan-gate';
import {
  columnOf,
  EVENT_COLUMN as c,
  fieldsFrom,
  keyOf,
  type EventFieldSpec,
} from '@app/common/events/event-fields';
import { eventRowColumns } from '@app/common/reads/event-record';
import { columnArrays, INGEST_COLUMNS, unnestArrays } from '@app/ingest/ingest-columns';
import type { QuarantineEvent, QuarantineFilters, QuarantineRow, ReplayRow } from './quarantine.types';

const PARTITION_NAME = /^quarantine_p(\d{4})(\d{2})(\d{2})$/;

const COLUMNS = `${eventRowColumns('quarantine')}, code, violations`;

/** The fields of an event as ingest holds it (EventValues), each under its key. */
const EVENT_VALUES = fieldsFrom('event');

/** A field in a replay's select list: as ingest holds it, times and bigints as numbers. */
function replayExpression(f: EventFieldSpec): string {
  if (f.type === 'timestamptz') return `floor(extract(epoch FROM ${f.column}) * 1000)::float8`;
  if (f.type === 'int8') return `${f.column}::float8`;
  return f.column;
}

// What a replay reads of a quarantined event: ingest's fields under ingest's keys, so that the
// driver's rows are used as they come, and not the violations (the replay checks again).
const REPLAY_COLUMNS = [
  'id::text AS id',
  `(extract(epoch FROM ${columnOf('receivedAt')}) * 1000000)::bigint::text AS "receivedUs"`,
  ...EVENT_VALUES.map((f) => `${replayExpression(f)} AS "${keyOf(f)}"`),
].join(', ');

// The insert of quarantined events: the stored event's columns as ingest writes them, arrays in
// PostgreSQL's binary format (INGEST_COLUMNS, columnArrays), then the codes and the violations
// (JSON text). A JSON record set parsed in SQL cost the database three times the CPU of writing
// as many accepted events.
const KEPT_NAMES = INGEST_COLUMNS.map((col) => col.name).join(', ');
const COLUMN_COUNT = INGEST_COLUMNS.length;
const INSERT_ROWS = `INSERT INTO quarantine (${KEPT_NAMES}, code, violations)
  SELECT ${KEPT_NAMES}, code, violations::jsonb
    FROM unnest(${unnestArrays(INGEST_COLUMNS)}, $${COLUMN_COUNT + 1}::text[], $${COLUMN_COUNT + 2}::text[])
      AS i(${KEPT_NAMES}, code, violations)`;

/** WHERE clauses for an app, the filters and a position (newest first, or oldest first). */
function whereOf(
  appId: string,
  filters: QuarantineFilters,
  after: CursorPosition | null,
  newestFirst: boolean,
) {
  const params: unknown[] = [appId];
  const where = [`${c.appId} = $1`];
  if (filters.eventName !== undefined) where.push(`${c.eventName} = $${params.push(filters.eventName)}`);
  if (filters.code !== undefined) where.push(`code = $${params.push(filters.code)}`);
  if (filters.replayable) where.push(`code IN ('schema_violation', 'unplanned_event')`);
  if (after) {
    const op = newestFirst ? '<' : '>';
    params.push(microsLiteral(after.receivedUs), after.id.toString());
    where.push(
      `(${c.receivedAt}, ${c.id}) ${op} ($${params.length - 1}::timestamptz, $${params.length}::bigint)`,
    );
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
    const events = rejected.map((r) => r.event);
    const arrays = columnArrays({ batches: [{ appId, receivedAt }], events, batchOf: events.map(() => 0) });
    const codes = rejected.map((r) => r.code);
    const violations = rejected.map((r) => JSON.stringify(r.violations));
    await manager.query(INSERT_ROWS, [...arrays, codes, violations]);
  }

  /** Forgets the per-day counts of days before `day` (`YYYY-MM-DD`), whose partitions are gone. */
  async forgetDaysBefore(day: string): Promise<void> {
    await this.db.query(`DELETE FROM quarantine_days WHERE day < $1::date`, [day]);
  }

  /** One page of an app's quarantine, newest first by (receivedAt, id), strictly after `after`. */
  async page(appId: string, filters: QuarantineFilters, after: CursorPosition | null, limit: number) {
    const { params, where } = whereOf(appId, filters, after, true);
    params.push(limit);
    return (await this.db.query(
      `SELECT ${COLUMNS} FROM quarantine WHERE ${where}
        ORDER BY quarantine.${c.receivedAt} DESC, quarantine.${c.id} DESC LIMIT $${params.length}`,
      params,
    )) as QuarantineRow[];
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
          ORDER BY quarantine.${c.receivedAt}, quarantine.${c.id} LIMIT $${params.length}
          FOR UPDATE SKIP LOCKED`,
        params,
      )) as ReplayRow[];
      claimed(rows);
      const { remove, result } = await fn(rows, manager);
      if (remove.length) {
        // The chunk is ordered by (receivedAt, id): its first and last rows bound the partition
        // range to search, and the ids (one sequence for the whole table) name the rows.
        await manager.query(
          `DELETE FROM quarantine WHERE ${c.appId} = $1 AND ${c.receivedAt} BETWEEN $2::timestamptz AND $3::timestamptz
              AND ${c.id} = ANY($4::bigint[])`,
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
      `WITH gone AS (DELETE FROM quarantine WHERE ${c.appId} = $1 AND ${c.anonymousUserId} = ANY($2::text[])
                    RETURNING 1)
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
