import { Injectable } from '@nestjs/common';
import { dimensionSql, dimensionsOf } from './dimensions';
import {
  bitmapLength,
  entryOf,
  paddedBitmap,
  idKey,
  packedNumber,
  packOf,
  SET_TABLES,
  tailOf,
  type InsightDay,
  type Sql,
} from './insight-computation.repository';
import { EVENT_COLUMN as c } from '@app/common/events/event-fields';
import { MemberList, varbitArray } from './member-bitmaps';
import { byteaArray, encodeMembers } from './member-lists';
import type { BreakdownKey } from './day-increment';

/**
 * About this many bytes of bitmaps or lists go in one statement's parameters: a batch is built (its lists
 * parsed, its bits set) while the previous statement runs, so the process holds one batch at a
 * time and its event loop is never busy for long.
 */
const BATCH_BYTES = 8 * 1024 * 1024;

/** One user set of the day: per mode over every event (`name = ''`), or per event name. */
export interface DayUsersRow {
  set: 'u';
  m: boolean;
  value: string;
  /** The members' numbers, comma-separated (member-bitmaps.ts). */
  users: string;
}

/**
 * One breakdown row of the day as computed, but for its sets: the statistics as PostgreSQL's
 * text (exact: the sum a numeric, the others with extra_float_digits set), the members as lists.
 */
export interface BreakdownDayRow {
  set: 'b';
  m: boolean;
  dimension: string;
  kind: number;
  value: string;
  events: string;
  fv_count: string;
  fv_sum: string | null;
  fv_min: string | null;
  fv_max: string | null;
  users: string | null;
  sessions: string | null;
}

/**
 * What identifies the events a day's rows hold: their count, the sum of their ids and of a 64-bit
 * hash of each id (both exact, as numeric text), and the largest id (0 for none).
 */
export interface DayParts {
  events: string;
  idSum: string;
  hashSum: string;
  maxId: string;
}

/** The parts of the events the day's statement read, as its last row (set `p`). */
interface DayPartsRow {
  set: 'p';
  events: string;
  fv_count: string;
  fv_sum: string;
  fv_min: string;
}

type DayRow = DayUsersRow | BreakdownDayRow | DayPartsRow;

/** The rows of the day's statement, by set. */
export interface DayRows {
  users: DayUsersRow[];
  breakdowns: BreakdownDayRow[];
  parts: DayParts;
}

/** A breakdown row ready to write: its members as compact lists. */
export type EncodedBreakdown = Omit<BreakdownDayRow, 'users' | 'sessions'> & {
  users: Buffer;
  sessions: Buffer;
};

/**
 * The events of the day with the dense numbers of their user and session, in CTE `evn` (columns
 * eid, m, fv, d0…dN, fvn: fv as numeric, and uno, sno: the numbers as text, each converted once);
 * `after` narrows the events read (`AND e.id > $n`). On
 * the way, the day's ids not numbered yet get the app's next numbers (in the order of their keys,
 * users and sessions each from their counter), appended to their packs. Each id of the day is
 * hashed once and looked up once, in its one pack; the events then join the day's ids by the id
 * itself. The new ids are joined only with their counters (two rows at most), so that no estimate
 * of how many are new can make that step quadratic.
 */
function numberedEventsSql(dims: string[], after: string): string {
  const cols = dims.map((expr, i) => `${expr} AS d${i}`).join(', ');
  return `k AS (SELECT pii_secret AS s FROM apps WHERE id = $1),
  ev AS MATERIALIZED (
    SELECT e.${c.id} AS eid, e.${c.isTestMode} AS m, e.${c.floatValue} AS fv, e.${c.anonymousUserId} AS uid,
           e.${c.sessionId} AS sid, ${cols}
      FROM events e WHERE e.${c.appId} = $1 AND e.${c.timestamp} >= $3 AND e.${c.timestamp} < $4 ${after}
  ), found AS (
    SELECT x.kind, x.id, x.key, p.entries, ${tailOf('x.key')} AS tail, position(${tailOf('x.key')} IN p.entries) AS at
      FROM (SELECT 'u'::"char" AS kind, uid AS id, ${idKey('k.s', 'uid')} AS key
              FROM (SELECT DISTINCT uid FROM ev WHERE uid IS NOT NULL) d CROSS JOIN k
            UNION ALL
            SELECT 's'::"char", sid, ${idKey('k.s', 'sid')}
              FROM (SELECT DISTINCT sid FROM ev WHERE sid IS NOT NULL) d CROSS JOIN k) x
      LEFT JOIN insight_id_packs p ON p.app_id = $1 AND p.kind = x.kind AND p.pack = ${packOf('x.key')}
    OFFSET 0
  ), ids AS MATERIALIZED (
    SELECT kind, id, key, ${packedNumber('entries', 'tail', 'at')} AS no FROM found
  ), todo AS MATERIALIZED (
    SELECT kind, id, key, (dense_rank() OVER (PARTITION BY kind ORDER BY key))::int - 1 AS r FROM ids WHERE no IS NULL
  ), n AS (SELECT kind, max(r) + 1 AS n FROM todo GROUP BY kind),
  counter AS (
    INSERT INTO insight_counters (app_id, kind, next_no) SELECT $1, kind, n FROM n
    ON CONFLICT (app_id, kind) DO UPDATE SET next_no = insight_counters.next_no + EXCLUDED.next_no
    RETURNING kind, next_no
  ), numbered AS MATERIALIZED (
    SELECT t.kind, t.id, t.key, c.next_no - n.n + t.r AS no FROM todo t JOIN n USING (kind) JOIN counter c USING (kind)
  ), fresh AS (
    INSERT INTO insight_id_packs AS p (app_id, kind, pack, entries)
    SELECT $1::uuid, kind, ${packOf('key')}, string_agg(${entryOf('key', 'no')}, ''::bytea ORDER BY no)
      FROM (SELECT DISTINCT kind, key, no FROM numbered) n
     GROUP BY kind, ${packOf('key')}
    ON CONFLICT (app_id, kind, pack) DO UPDATE SET entries = p.entries || EXCLUDED.entries
  ), nos AS MATERIALIZED (
    SELECT kind, id, no FROM ids WHERE no IS NOT NULL UNION ALL SELECT kind, id, no FROM numbered
  ), evn AS (
    SELECT ev.*, ev.fv::numeric AS fvn, u.no::text AS uno, s.no::text AS sno FROM ev
      LEFT JOIN nos u ON u.kind = 'u' AND u.id = ev.uid
      LEFT JOIN nos s ON s.kind = 's' AND s.id = ev.sid
  )`;
}

/**
 * CTE `g`: one pass of grouping sets over `evn`, per mode, dimension and value: the events, the
 * float-value statistics and the members' lists. CTE `b`: the
 * breakdown rows, the `$5` values with most events per dimension (ties by value) kept, the rest
 * folded into one row of kind 2.
 */
function groupsSql(dimCount: number): string {
  const each = (f: (i: number) => string) => Array.from({ length: dimCount }, (_, i) => f(i)).join(' ');
  const sets = Array.from({ length: dimCount }, (_, i) => `(m, d${i})`).join(', ');
  return `g AS MATERIALIZED (
    SELECT m, CASE ${each((i) => `WHEN GROUPING(d${i}) = 0 THEN ${i}`)} END AS dim,
           (CASE ${each((i) => `WHEN GROUPING(d${i}) = 0 THEN d${i}`)} END) COLLATE "C" AS value,
           count(*) AS events, count(fv) AS fv_count, sum(fvn) AS fv_sum, min(fv) AS fv_min,
           max(fv) AS fv_max, string_agg(uno, ',') AS us, string_agg(sno, ',') AS ss
      FROM evn GROUP BY GROUPING SETS (${sets})
  ), ranked AS (
    SELECT dim, value, row_number() OVER (PARTITION BY dim ORDER BY sum(events) DESC, value NULLS LAST) AS rn
      FROM g WHERE dim IS NOT NULL GROUP BY dim, value
  ), b AS (
    SELECT g.m, g.dim, CASE WHEN r.rn > $5 THEN 2 WHEN g.value IS NULL THEN 1 ELSE 0 END AS kind,
           CASE WHEN r.rn > $5 THEN '' ELSE coalesce(g.value, '') END AS value,
           sum(g.events) AS events, sum(g.fv_count) AS fv_count, sum(g.fv_sum) AS fv_sum,
           min(g.fv_min) AS fv_min, max(g.fv_max) AS fv_max, string_agg(g.us, ',') AS us, string_agg(g.ss, ',') AS ss
      FROM g JOIN ranked r ON r.dim = g.dim AND r.value IS NOT DISTINCT FROM g.value
     GROUP BY 1, 2, 3, 4
  )`;
}

/**
 * Runs `statement` in the caller's transaction with nested loops off, then puts them back.
 *
 * The day's statement joins the day's events to their ids' numbers, and the ids to their packs.
 * Planned from statistics, those are hash joins. A partition filled faster than autovacuum
 * analyzes it (a restore, a bulk load, a burst) has none: its events are then estimated at a row
 * or two, and the joins become nested loops, quadratic in the day's events (a day of 111,111
 * events ran for more than 12 minutes, holding the computation lock, instead of about 3 s). With
 * nested loops off, the joins are hashed whatever the estimates; a join that has no other way
 * (the one-row secret) still loops.
 */
export function withoutNestedLoops<T>(runner: Sql, statement: () => Promise<T>): Promise<T> {
  return withLocalSetting(runner, 'enable_nestloop', 'off', statement);
}

/** Runs `statement` in the caller's transaction without parallel workers, then puts them back. */
export function withoutParallelWorkers<T>(runner: Sql, statement: () => Promise<T>): Promise<T> {
  return withLocalSetting(runner, 'max_parallel_workers_per_gather', '0', statement);
}

async function withLocalSetting<T>(
  runner: Sql,
  name: string,
  value: string,
  statement: () => Promise<T>,
): Promise<T> {
  await runner.query(`SET LOCAL ${name} = ${value}`);
  const result = await statement();
  await runner.query(`SET LOCAL ${name} TO DEFAULT`);
  return result;
}

/** Events past the stored ones up to which a day's statement may loop over them (nested loops). */
const FEW_EVENTS = 1_000;

/**
 * The per-day statements of insights: one reads the day (numbering new ids on the way) into its
 * user sets and breakdown rows with their members listed; the process builds the user sets'
 * bitmaps (member-bitmaps.ts) and the breakdowns' compact lists (member-lists.ts); two more write
 * them over the day's stored rows, or add them to the stored rows when the statement read only
 * the events the day gained.
 */
@Injectable()
export class InsightDayRepository {
  /**
   * The day's user sets (per mode over every event, and per mode and event name for the names
   * that have rollup rows that day: the same bound as the rollups) and breakdown rows (per
   * dimension of the app, mode and value; the `maxValues` values with the most events, ties by
   * value, keep their rows, the rest of the day is one row of kind 2), from one read of the
   * day's events, with the parts of the events read. Gives the day's users and sessions not
   * numbered yet the app's next numbers.
   */
  async load(
    runner: Sql,
    appId: string,
    day: InsightDay,
    declared: readonly string[],
    maxValues: number,
  ): Promise<DayRows> {
    const { text, params } = this.daySql(appId, day, declared, maxValues);
    return withoutNestedLoops(runner, async () => bySet((await runner.query(text, params)) as DayRow[]));
  }

  /**
   * The rows of the day's events with ids past `afterId` alone, as `load` gives them but with
   * every value kept (no bound, no row of kind 2): what they add to the stored rows. Up to
   * FEW_EVENTS of them are joined as the planner likes, by the index of the id packs; more, by
   * hashes, as `load` does.
   */
  async loadAfter(
    runner: Sql,
    appId: string,
    day: InsightDay,
    declared: readonly string[],
    afterId: string,
    expected: number,
  ): Promise<DayRows> {
    const { text, params } = this.daySql(appId, day, declared, 2 ** 31 - 1, afterId);
    const run = async () => bySet((await runner.query(text, params)) as DayRow[]);
    return expected <= FEW_EVENTS ? run() : withoutNestedLoops(runner, run);
  }

  /** The statement of `load` (or of `loadAfter`, with `afterId`) and its parameters. */
  daySql(
    appId: string,
    day: InsightDay,
    declared: readonly string[],
    maxValues: number,
    afterId?: string,
  ): { text: string; params: unknown[] } {
    const names = dimensionsOf(declared);
    const params: unknown[] = [appId, day.day, new Date(day.start), new Date(day.end), maxValues, names];
    let keyIndex = 0;
    const dims = names.map((name) =>
      dimensionSql(name, () => {
        params.push(declared[keyIndex++]);
        return `$${params.length}::text`;
      }),
    );
    let after = '';
    if (afterId !== undefined) {
      params.push(afterId);
      after = `AND e.${c.id} > $${params.length}::bigint`;
    }
    // The user sets per event name come from the eventName dimension's groups.
    const nameDim = names.indexOf('eventName');
    if (nameDim < 0) throw new Error('insights: the dimensions lack eventName');
    const rollups = day.rezone ? 'rollups_rezone' : 'rollups';
    return {
      text: `WITH ${numberedEventsSql(dims, after)}, ${groupsSql(dims.length)}
       SELECT 'u' AS set, m, NULL::text AS dimension, NULL::int AS kind, value, NULL::text AS events,
              NULL::text AS fv_count, NULL::text AS fv_sum, NULL::text AS fv_min, NULL::text AS fv_max,
              us AS users, NULL::text AS sessions
         FROM g
        WHERE dim = ${nameDim} AND us IS NOT NULL
          AND value IN (SELECT event_name FROM ${rollups} WHERE app_id = $1 AND day = $2::date AND event_name <> '')
       UNION ALL
       -- Every event of the mode: the union of its event names' users.
       SELECT 'u', m, NULL, NULL, '', NULL, NULL, NULL, NULL, NULL, string_agg(us, ','), NULL
         FROM g WHERE dim = ${nameDim} AND us IS NOT NULL GROUP BY m
       UNION ALL
       -- A value without float values keeps a null sum.
       SELECT 'b', m, ($6::text[])[dim + 1], kind, value, events::text, fv_count::text,
              CASE WHEN fv_count > 0 THEN fv_sum::text END, fv_min::text, fv_max::text, us, ss
         FROM b
       UNION ALL
       -- The parts of the events read (DayParts): count, id sum, hash sum, largest id.
       SELECT 'p', NULL, NULL, NULL, NULL, count(*)::text, coalesce(sum(eid), 0)::text,
              coalesce(sum(hashint8extended(eid, 0)), 0)::text, coalesce(max(eid), 0)::text, NULL, NULL, NULL
         FROM ev`,
      params,
    };
  }

  /**
   * Keeps an unchanged day's rows, which are what computing it now would write. Only their time
   * of computation can differ, and it decides whether the day is final: rows computed before the
   * day ended take the transaction's time once it has ended.
   */
  async keepDay(runner: Sql, appId: string, day: InsightDay): Promise<void> {
    for (const table of SET_TABLES) {
      await runner.query(
        `UPDATE ${table} SET computed_at = now()
          WHERE app_id = $1 AND rezone = $2 AND day = $3::date AND computed_at < day_end AND now() >= day_end`,
        [appId, day.rezone, day.day],
      );
    }
  }

  /**
   * Writes the day's user sets over its stored ones: sets no longer computed leave, the others
   * are inserted or updated. A stored bitmap equal to the new one is kept as it is (the row's
   * stored value is reused, not compressed and written again), so recomputing an unchanged day
   * costs little more than reading it.
   */
  async writeDayUsers(runner: Sql, appId: string, day: InsightDay, rows: DayUsersRow[]): Promise<void> {
    await runner.query(
      `DELETE FROM insight_day_users t
        WHERE t.app_id = $1 AND t.rezone = $2 AND t.day = $3::date
          AND NOT EXISTS (SELECT 1 FROM unnest($4::boolean[], $5::text[]) AS r(m, name)
                           WHERE r.m = t.is_test_mode AND r.name = t.event_name)`,
      [appId, day.rezone, day.day, rows.map((r) => r.m), rows.map((r) => r.value)],
    );
    await this.upsertDayUsers(
      runner,
      appId,
      day,
      rows,
      `CASE WHEN t.users = EXCLUDED.users THEN t.users ELSE EXCLUDED.users END`,
    );
  }

  /**
   * Adds the members of `rows` to the day's user sets: a set's bitmap becomes the union of the
   * stored one and the new one, as long as the longer of the two (each padded with zeros to the
   * app's bitmap length first, as `bit_or` needs equal lengths).
   */
  async addDayUsers(runner: Sql, appId: string, day: InsightDay, rows: DayUsersRow[]): Promise<void> {
    if (!rows.length) return;
    const bits = await bitmapLength(runner, appId, 'u');
    const length = `greatest(length(t.users), length(EXCLUDED.users))`;
    const padded = (set: string) => paddedBitmap(set, bits, length);
    await this.upsertDayUsers(runner, appId, day, rows, `${padded('t.users')} | ${padded('EXCLUDED.users')}`);
  }

  private async upsertDayUsers(
    runner: Sql,
    appId: string,
    day: InsightDay,
    rows: DayUsersRow[],
    users: string,
  ): Promise<void> {
    const parse = (r: DayUsersRow) => ({ ...r, users: new MemberList(r.users) });
    for (const batch of batches(rows, parse, (r) => r.users.bytes)) {
      await runner.query(
        `INSERT INTO insight_day_users AS t (app_id, rezone, day, is_test_mode, event_name, users, timezone,
                                             day_end, computed_at)
         SELECT $1, $2, $3::date, r.m, r.name, r.users, $4, $5, now()
           FROM unnest($6::boolean[], $7::text[], $8::varbit[]) AS r(m, name, users)
         ON CONFLICT (app_id, rezone, event_name, day, is_test_mode) DO UPDATE
            SET users = ${users},
                timezone = EXCLUDED.timezone, day_end = EXCLUDED.day_end, computed_at = EXCLUDED.computed_at`,
        [
          appId,
          day.rezone,
          day.day,
          day.zone,
          new Date(day.end),
          batch.map((r) => r.m),
          batch.map((r) => r.value),
          varbitArray(batch.map((r) => r.users)),
        ],
      );
    }
  }

  /**
   * Writes the day's breakdown rows over its stored ones, as writeDayUsers does; their users and
   * sessions as compact lists (member-lists.ts).
   */
  async writeBreakdowns(runner: Sql, appId: string, day: InsightDay, rows: BreakdownDayRow[]): Promise<void> {
    await runner.query(
      `DELETE FROM insight_breakdowns t
        WHERE t.app_id = $1 AND t.rezone = $2 AND t.day = $3::date
          AND NOT EXISTS (SELECT 1 FROM unnest($4::text[], $5::boolean[], $6::smallint[], $7::text[]) AS r(d, m, k, v)
                           WHERE r.d = t.dimension AND r.m = t.is_test_mode AND r.k = t.kind AND r.v = t.value)`,
      [appId, day.rezone, day.day, ...keyColumns(rows)],
    );
    await this.upsertBreakdowns(runner, appId, day, rows, encodeLists, {
      events: 'EXCLUDED.events',
      fv_count: 'EXCLUDED.fv_count',
      fv_sum: 'EXCLUDED.fv_sum',
      fv_min: 'EXCLUDED.fv_min',
      fv_max: 'EXCLUDED.fv_max',
      users: 'CASE WHEN t.users = EXCLUDED.users THEN t.users ELSE EXCLUDED.users END',
      sessions: 'CASE WHEN t.sessions = EXCLUDED.sessions THEN t.sessions ELSE EXCLUDED.sessions END',
    });
  }

  /**
   * Adds `rows` to the day's breakdown rows: counts and sums added, the least minimum and the
   * greatest maximum, and the lists as given (the union of the stored and the new members,
   * made by the caller from storedLists).
   */
  async addBreakdowns(runner: Sql, appId: string, day: InsightDay, rows: EncodedBreakdown[]): Promise<void> {
    await this.upsertBreakdowns(runner, appId, day, rows, (r) => r, {
      events: 't.events + EXCLUDED.events',
      fv_count: 't.fv_count + EXCLUDED.fv_count',
      fv_sum: 'coalesce(t.fv_sum + EXCLUDED.fv_sum, t.fv_sum, EXCLUDED.fv_sum)',
      fv_min: 'least(t.fv_min, EXCLUDED.fv_min)',
      fv_max: 'greatest(t.fv_max, EXCLUDED.fv_max)',
      users: 'EXCLUDED.users',
      sessions: 'EXCLUDED.sessions',
    });
  }

  /** The keys of the day's breakdown rows (day-increment.ts reads the value bound from them). */
  async storedKeys(runner: Sql, appId: string, day: InsightDay): Promise<BreakdownKey[]> {
    return (await runner.query(
      `SELECT dimension, is_test_mode AS m, kind, value FROM insight_breakdowns
        WHERE app_id = $1 AND rezone = $2 AND day = $3::date`,
      [appId, day.rezone, day.day],
    )) as BreakdownKey[];
  }

  /** The users and sessions of the day's breakdown rows with the given keys, where stored. */
  async storedLists(
    runner: Sql,
    appId: string,
    day: InsightDay,
    keys: BreakdownKey[],
  ): Promise<(BreakdownKey & { users: Buffer; sessions: Buffer })[]> {
    if (!keys.length) return [];
    return (await runner.query(
      `SELECT t.dimension, t.is_test_mode AS m, t.kind, t.value, t.users, t.sessions
         FROM unnest($4::text[], $5::boolean[], $6::smallint[], $7::text[]) AS r(d, m, k, v)
         JOIN insight_breakdowns t
           ON t.app_id = $1 AND t.rezone = $2 AND t.day = $3::date
          AND t.dimension = r.d AND t.is_test_mode = r.m AND t.kind = r.k AND t.value = r.v`,
      [appId, day.rezone, day.day, ...keyColumns(keys)],
    )) as (BreakdownKey & { users: Buffer; sessions: Buffer })[];
  }

  private async upsertBreakdowns<R>(
    runner: Sql,
    appId: string,
    day: InsightDay,
    rows: R[],
    encode: (row: R) => EncodedBreakdown,
    set: Record<'events' | 'fv_count' | 'fv_sum' | 'fv_min' | 'fv_max' | 'users' | 'sessions', string>,
  ): Promise<void> {
    for (const batch of batches(rows, encode, (r) => r.users.length + r.sessions.length)) {
      await runner.query(
        `INSERT INTO insight_breakdowns AS t (app_id, rezone, dimension, day, is_test_mode, kind, value, events,
                                              fv_count, fv_sum, fv_min, fv_max, users, sessions, timezone,
                                              day_end, computed_at)
         SELECT $1, $2, r.d, $3::date, r.m, r.k, r.v, r.events, r.fv_count, r.fv_sum, r.fv_min, r.fv_max,
                r.users, r.sessions, $4, $5, now()
           FROM unnest($6::text[], $7::boolean[], $8::smallint[], $9::text[], $10::bigint[], $11::bigint[],
                       $12::numeric[], $13::float8[], $14::float8[], $15::bytea[], $16::bytea[])
                AS r(d, m, k, v, events, fv_count, fv_sum, fv_min, fv_max, users, sessions)
         ON CONFLICT (app_id, rezone, dimension, day, is_test_mode, kind, value) DO UPDATE
            SET ${Object.entries(set)
              .map(([column, value]) => `${column} = ${value}`)
              .join(', ')},
                timezone = EXCLUDED.timezone, day_end = EXCLUDED.day_end, computed_at = EXCLUDED.computed_at`,
        [
          appId,
          day.rezone,
          day.day,
          day.zone,
          new Date(day.end),
          ...keyColumns(batch),
          batch.map((r) => r.events),
          batch.map((r) => r.fv_count),
          batch.map((r) => r.fv_sum),
          batch.map((r) => r.fv_min),
          batch.map((r) => r.fv_max),
          byteaArray(batch.map((r) => r.users)),
          byteaArray(batch.map((r) => r.sessions)),
        ],
      );
    }
  }
}

/** A computed breakdown row with its members' lists encoded (member-lists.ts). */
export function encodeLists(row: BreakdownDayRow): EncodedBreakdown {
  return {
    ...row,
    users: encodeMembers(new MemberList(row.users).members),
    sessions: encodeMembers(new MemberList(row.sessions).members),
  };
}

/** The statement's rows by set; its parts row is always there (an aggregate without GROUP BY). */
function bySet(rows: DayRow[]): DayRows {
  const out: DayRows = {
    users: [],
    breakdowns: [],
    parts: { events: '0', idSum: '0', hashSum: '0', maxId: '0' },
  };
  for (const row of rows) {
    if (row.set === 'u') out.users.push(row);
    else if (row.set === 'b') out.breakdowns.push(row);
    else out.parts = { events: row.events, idSum: row.fv_count, hashSum: row.fv_sum, maxId: row.fv_min };
  }
  return out;
}

/** The key columns of breakdown rows (dimension, mode, kind, value), as array parameters. */
function keyColumns(rows: Pick<BreakdownDayRow, 'dimension' | 'm' | 'kind' | 'value'>[]): unknown[] {
  return [
    rows.map((r) => r.dimension),
    rows.map((r) => r.m),
    rows.map((r) => r.kind),
    rows.map((r) => r.value),
  ];
}

/**
 * Rows parsed one batch at a time, each batch closed once it holds BATCH_BYTES of sets or
 * more; the next batch is parsed only when the caller asks for it.
 */
function* batches<R, P>(rows: R[], parse: (row: R) => P, bytes: (parsed: P) => number): Generator<P[]> {
  let batch: P[] = [];
  let size = 0;
  for (const row of rows) {
    const parsed = parse(row);
    batch.push(parsed);
    size += bytes(parsed);
    if (size >= BATCH_BYTES) {
      yield batch;
      batch = [];
      size = 0;
    }
  }
  if (batch.length) yield batch;
}
