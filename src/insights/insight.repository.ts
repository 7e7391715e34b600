import { Injectable } from '@nestjs/common';
import { to as copyTo } from 'pg-copy-streams';
import { readCopyTuples } from '@app/database/copy-tuples';
import { withDriverClient } from '@app/database/driver-client';
import { ReadDatabase } from '@app/database/read-database';
import { bitmapLength, paddedBitmap } from './insight-computation.repository';
import { dimensionSql, FILTER_DIMENSIONS } from './dimensions';
import { MemberUnion } from './member-lists';
import { EVENT_COLUMN as c } from '@app/common/events/event-fields';
import { saturatedDouble } from '@app/rollups/saturated-sum';

/** One bucket of active users: its inclusive local days. */
export interface DayBucket {
  start: string;
  end: string;
}

export interface ActiveUsersQuery {
  /** '' for every event. */
  eventName: string;
  modes: boolean[];
  buckets: DayBucket[];
}

export interface BucketCount {
  users: number;
  /** Every stored set of the bucket was computed after its day ended. */
  settled: boolean;
}

export interface BreakdownQuery {
  dimension: string;
  modes: boolean[];
  fromDate: string;
  toDate: string;
  perDay: boolean;
  limit: number;
  eventName?: string;
  /** Equality filters on built-in dimensions, by API name. */
  filters: Record<string, string>;
}

/** One breakdown row as read: `kind` 0 a value, 1 the events without the field, 2 other. */
export interface BreakdownRow {
  date: string | null;
  kind: number;
  value: string | null;
  events: number;
  users: number;
  sessions: number;
  fvCount: number;
  fvSum: number | null;
  fvMin: number | null;
  fvMax: number | null;
}

interface RawBreakdownRow {
  date: string | null;
  kind: number;
  value: string;
  events: string;
  users: string;
  sessions: string;
  fv_count: string;
  fv_sum: number | null;
  fv_min: number | null;
  fv_max: number | null;
}

function toRow(r: RawBreakdownRow): BreakdownRow {
  return {
    date: r.date,
    kind: r.kind,
    value: r.kind === 0 ? r.value : null,
    events: Number(r.events),
    users: Number(r.users),
    sessions: Number(r.sessions),
    fvCount: Number(r.fv_count),
    fvSum: r.fv_sum,
    fvMin: r.fv_min,
    fvMax: r.fv_max,
  };
}

/** A binary COPY field as text, or null. */
const text = (field: Buffer | null): string | null => (field ? field.toString('utf8') : null);

/** A binary COPY `float8` field, or null. */
const float8 = (field: Buffer | null): number | null => (field ? field.readDoubleBE(0) : null);

/**
 * The answer of a stored breakdown from the binary COPY of `storedBreakdown`: first the answer
 * rows in order, each tuple (0, index, date, kind, value, events, fv_count, fv_sum, fv_min,
 * fv_max, null, null); then the kept rows' lists, each tuple (1, the index of its answer row, nine
 * nulls, users, sessions), ordered by answer row. The distinct users and sessions of each answer
 * row are counted (member-lists.ts) as its lists arrive, one answer row after the other.
 */
async function readAnswer(copy: AsyncIterable<Buffer>): Promise<BreakdownRow[]> {
  const answer: BreakdownRow[] = [];
  const users = new MemberUnion();
  const sessions = new MemberUnion();
  let counting = -1;
  const settle = () => {
    if (counting < 0) return;
    answer[counting].users = users.count;
    answer[counting].sessions = sessions.count;
    users.reset();
    sessions.reset();
  };
  await readCopyTuples(copy, (fields) => {
    const i = fields[1]!.readInt32BE(0);
    if (fields[0]!.readInt32BE(0) === 0) {
      if (i !== answer.length) throw new Error('insights: an answer row out of order');
      const kind = fields[3]!.readInt32BE(0);
      answer.push({
        date: text(fields[2]),
        kind,
        value: kind === 0 ? text(fields[4]) : null,
        events: Number(text(fields[5])),
        users: 0,
        sessions: 0,
        fvCount: Number(text(fields[6])),
        fvSum: float8(fields[7]),
        fvMin: float8(fields[8]),
        fvMax: float8(fields[9]),
      });
      return;
    }
    if (i !== counting) {
      settle();
      if (!answer[i]) throw new Error('insights: a list of no answer row');
      counting = i;
    }
    users.add(fields[10] ?? EMPTY);
    sessions.add(fields[11] ?? EMPTY);
  });
  settle();
  return answer;
}

const EMPTY = new Uint8Array(0);

/** Reads of the insight tables (and of the events, for filtered breakdowns) for the endpoints. */
@Injectable()
export class InsightRepository {
  constructor(private readonly read: ReadDatabase) {}

  /** The zone of the app's served days and its declared payload dimensions. */
  async appInfo(appId: string): Promise<{ zone: string; dimensions: string[] }> {
    const rows = (await this.read.run((db) =>
      db.query(`SELECT rollup_timezone AS zone, dimensions FROM apps WHERE id = $1`, [appId]),
    )) as { zone: string; dimensions: string[] }[];
    return rows[0] ?? { zone: 'UTC', dimensions: [] };
  }

  /** Distinct users of each bucket: the union of the day sets it covers, counted. */
  async activeUsers(appId: string, query: ActiveUsersQuery): Promise<BucketCount[]> {
    const from = query.buckets.reduce((m, b) => (b.start < m ? b.start : m), query.buckets[0].start);
    const to = query.buckets.reduce((m, b) => (b.end > m ? b.end : m), query.buckets[0].end);
    return this.read.run(async (db) => {
      const n = await bitmapLength(db, appId, 'u');
      const rows = (await db.query(
        `WITH sets AS (
           SELECT day, bit_or(${paddedBitmap('users', n, String(n))}) AS u,
                  bool_and(computed_at >= day_end) AS settled
             FROM insight_day_users
            WHERE app_id = $1 AND NOT rezone AND event_name = $2 AND is_test_mode = ANY($3::boolean[])
              AND day BETWEEN $4::date AND $5::date
            GROUP BY day
         )
         SELECT b.i, coalesce(bit_count(bit_or(s.u)), 0)::float8 AS users,
                coalesce(bool_and(s.settled), true) AS settled
           FROM unnest($6::date[], $7::date[]) WITH ORDINALITY AS b(s, e, i)
           LEFT JOIN sets s ON s.day BETWEEN b.s AND b.e
          GROUP BY b.i ORDER BY b.i`,
        [
          appId,
          query.eventName,
          query.modes,
          from,
          to,
          query.buckets.map((b) => b.start),
          query.buckets.map((b) => b.end),
        ],
      )) as { users: number; settled: boolean }[];
      return rows.map((r) => ({ users: Number(r.users), settled: r.settled }));
    });
  }

  /**
   * A breakdown from the kept daily rows (no filter but the mode), in one statement: a binary
   * COPY gives the answer rows with their counts and statistics (ranked and folded in SQL), then
   * every kept row's users and sessions lists tagged with the answer row they fall into, as bytes
   * (a text result would send them as hex and make strings of it); the process counts each
   * answer row's distinct members (member-lists.ts) as they arrive. The answer rows' aggregation
   * runs once, for both parts.
   */
  async storedBreakdown(appId: string, q: BreakdownQuery): Promise<BreakdownRow[]> {
    if (!Number.isSafeInteger(q.limit)) throw new Error('insights: bad limit');
    // The bucket of a row: its day (a date, so that the lists' join below finds each kept row by
    // its key), or one empty string for the whole range. Not NULL: that join matches buckets by
    // equality; with IS NOT DISTINCT FROM it rescanned the answer rows for each kept row.
    const grp = q.perDay ? 'day' : "''::text";
    return this.read.run((db) =>
      withDriverClient(db, async (client) => {
        // Literals, escaped by the driver: the COPY takes no parameters.
        const kept = `FROM insight_breakdowns
        WHERE app_id = ${client.escapeLiteral(appId)}::uuid AND NOT rezone
          AND dimension = ${client.escapeLiteral(q.dimension)}
          AND is_test_mode = ANY(${client.escapeLiteral(`{${q.modes.join(',')}}`)}::boolean[])
          AND day BETWEEN ${client.escapeLiteral(q.fromDate)}::date AND ${client.escapeLiteral(q.toDate)}::date`;
        const ctes = `WITH per AS (
       SELECT ${grp} AS grp, kind, value, sum(events) AS events, sum(fv_count) AS fv_count,
              sum(fv_sum::numeric) FILTER (WHERE fv_count > 0) AS fv_sum, min(fv_min) AS fv_min, max(fv_max) AS fv_max
         ${kept}
        GROUP BY ${grp}, kind, value
     ), ranked AS (
       SELECT *, row_number() OVER (PARTITION BY grp ORDER BY kind = 2, events DESC, kind, value) AS rn FROM per
     ), assigned AS (
       SELECT *, CASE WHEN kind = 2 OR rn > ${q.limit} THEN 2 ELSE kind END AS k,
                 CASE WHEN kind = 2 OR rn > ${q.limit} THEN '' ELSE value END AS v
         FROM ranked
     ), answer AS (
       SELECT grp, k, v, sum(events) AS events, sum(fv_count) AS fv_count, sum(fv_sum::numeric) AS fv_sum,
              min(fv_min) AS fv_min, max(fv_max) AS fv_max,
              (row_number() OVER (ORDER BY grp, k = 2, sum(events) DESC, k, v))::int - 1 AS i
         FROM assigned GROUP BY grp, k, v
     )`;
        // One statement: the answer rows, then the kept rows' lists tagged with the answer row
        // of their key (bucket, kind, value), found first in CTE tagged; the kept rows' lists are
        // joined to those keys alone.
        const answer = await readAnswer(
          client.query(
            copyTo(`COPY (${ctes}, tagged AS MATERIALIZED (
              SELECT a.grp, a.kind, a.value, f.i
                FROM assigned a JOIN answer f ON f.grp = a.grp AND f.k = a.k AND f.v = a.v
            )
            SELECT 0 AS part, i, ${q.perDay ? 'grp::text' : 'NULL::text'} AS date, k::int4 AS kind, v AS value,
                   events::text AS events, fv_count::text AS fv_count, ${saturatedDouble('fv_sum')} AS fv_sum,
                   fv_min::float8, fv_max::float8, NULL::bytea AS users, NULL::bytea AS sessions
              FROM answer
            UNION ALL
            SELECT 1, t.i, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, b.users, b.sessions
              FROM (SELECT ${grp} AS grp, kind, value, users, sessions ${kept}) b
              JOIN tagged t ON t.grp = b.grp AND t.kind = b.kind AND t.value = b.value
             ORDER BY part, i) TO STDOUT (FORMAT binary)`),
          ),
        );
        return answer;
      }),
    );
  }

  /**
   * A filtered breakdown, counted over the stored events of the app's local days [start, end)
   * (epoch ms) in `zone`.
   */
  async eventsBreakdown(
    appId: string,
    q: BreakdownQuery,
    window: { start: number; end: number; zone: string },
  ): Promise<BreakdownRow[]> {
    const params: unknown[] = [appId, new Date(window.start), new Date(window.end), q.modes, q.limit];
    let day = 'NULL::text';
    if (q.perDay) {
      params.push(window.zone);
      day = `(e.${c.timestamp} AT TIME ZONE $${params.length}::text)::date::text`;
    }
    const where: string[] = [];
    if (q.eventName !== undefined) {
      params.push(q.eventName);
      where.push(`e.${c.eventName} = $${params.length}`);
    }
    for (const d of FILTER_DIMENSIONS) {
      const value = q.filters[d.name];
      if (value === undefined) continue;
      params.push(value);
      where.push(`e.${d.column} = $${params.length}`);
    }
    const value = dimensionSql(q.dimension, () => {
      params.push(q.dimension.slice('payload.'.length));
      return `$${params.length}::text`;
    });
    return this.read.run(async (db) => {
      const rows = (await db.query(
        `WITH ev AS (
           SELECT ${day} AS grp, ${value} AS value, e.${c.anonymousUserId} AS uid, e.${c.sessionId} AS sid,
                  e.${c.floatValue} AS fv
             FROM events e
            WHERE e.${c.appId} = $1 AND e.${c.timestamp} >= $2 AND e.${c.timestamp} < $3
              AND e.${c.isTestMode} = ANY($4::boolean[])
              ${where.map((w) => `AND ${w}`).join(' ')}
         ), ranked AS (
           SELECT grp, value IS NULL AS missing, coalesce(value, '') AS v,
                  row_number() OVER (PARTITION BY grp ORDER BY count(*) DESC, value NULLS LAST) AS rn
             FROM ev GROUP BY grp, value
         )
         SELECT * FROM (
         SELECT r.grp AS date,
                CASE WHEN r.rn > $5 THEN 2 WHEN r.missing THEN 1 ELSE 0 END AS kind,
                CASE WHEN r.rn > $5 THEN '' ELSE r.v END AS value,
                count(*)::text AS events, count(DISTINCT ev.uid)::text AS users,
                count(DISTINCT ev.sid)::text AS sessions, count(ev.fv)::text AS fv_count,
                ${saturatedDouble(`sum(ev.fv::numeric)`)} AS fv_sum,
                min(ev.fv) AS fv_min, max(ev.fv) AS fv_max
           FROM ev JOIN ranked r
             ON coalesce(r.grp, '') = coalesce(ev.grp, '') AND r.v = coalesce(ev.value, '')
            AND r.missing = (ev.value IS NULL)
          GROUP BY 1, 2, 3
         ) x ORDER BY date, kind = 2, events::bigint DESC, kind, value`,
        params,
      )) as RawBreakdownRow[];
      return rows.map(toRow);
    });
  }
}
