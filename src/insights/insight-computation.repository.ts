import { Injectable } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import { dimensionSql, dimensionsOf } from './dimensions';

/** One local day to compute (the rollup computation's target). */
export interface InsightDay {
  day: string;
  zone: string;
  /** Epoch ms, [start, end). */
  start: number;
  end: number;
  /** True for the new set of a zone change. */
  rezone: boolean;
}

/** Whatever runs a query: a QueryRunner, an EntityManager or a DataSource. */
type Sql = { query(sql: string, params?: unknown[]): Promise<unknown> };

const WORK_MEM = '128MB';

// The largest finite double, as a numeric literal (the rollups' saturation of sums).
const MAX_DOUBLE = '1.7976931348623157e308::numeric';

/**
 * The key of an id in insight_ids: the first 16 bytes of SHA-256 over the app's secret and the
 * id. `secret` is an expression of the app's pii_secret.
 */
export function idKey(secret: string, id: string): string {
  return `substring(sha256(${secret} || convert_to(${id}, 'UTF8')) FOR 16)`;
}

// The app's secret, as a CTE `k` of one row, for statements whose $1 is the app id.
const SECRET_CTE = `k AS (SELECT pii_secret AS s FROM apps WHERE id = $1)`;

/**
 * A CTE `<name>` of the bytes of one bitmap per key: the key columns `keys`, a byte number `b`
 * (numbers 8b to 8b + 7) and its value `v`, from `members` (the key columns and a dense number
 * `no`). A member listed twice sets its bit twice: `members` need not be distinct.
 */
function bytesCte(name: string, members: string, keys: string): string {
  return `
  ${name} AS (
    SELECT ${keys}, no >> 3 AS b, bit_or(1 << (7 - (no & 7))) AS v FROM ${members} GROUP BY ${keys}, no >> 3
  )`;
}

/**
 * A CTE `<name>` that turns `bytes` (the key columns, `b` and `v`, as `bytesCte` gives) into one
 * bitmap per key: `bits`, whose bit i stands for number `from_no` + i. The bitmap spans only the
 * bytes from the key's first member to its last (a band), built as hexadecimal text with the
 * gaps filled by zero bytes, so the cost follows the members, not the numbers' range.
 */
function bandCte(name: string, bytes: string, keys: string): string {
  return `
  ${name} AS (
    SELECT ${keys}, (min(b) * 8)::int AS from_no,
           ('x' || string_agg(repeat('00', gap) || lpad(to_hex(v), 2, '0'), '' ORDER BY b))::varbit AS bits
      FROM (SELECT *, (b - lag(b, 1, b - 1) OVER (PARTITION BY ${keys} ORDER BY b) - 1)::int AS gap
              FROM ${bytes}) g
     GROUP BY ${keys}
  )`;
}

/**
 * A CTE `<name>` (id, no): the numbers of the distinct ids of column `column` of `ev`, for the
 * app's `kind`; each id is hashed once, not once per event.
 */
function numbersCte(name: string, ev: string, column: string, kind: 'u' | 's'): string {
  return `
  ${name} AS (
    SELECT d.id, i.no
      FROM (SELECT DISTINCT ${column} AS id FROM ${ev} WHERE ${column} IS NOT NULL) d
     CROSS JOIN k
      JOIN insight_ids i ON i.app_id = $1 AND i.kind = '${kind}' AND i.key = ${idKey('k.s', 'd.id')}
  )`;
}

/**
 * The length every bitmap of the app's `kind` fits in: the numbers given so far, rounded up to
 * whole bytes (at least one byte, as a bit type needs a positive length).
 */
export async function bitmapLength(runner: Sql, appId: string, kind: 'u' | 's'): Promise<number> {
  const rows = (await runner.query(
    `SELECT next_no FROM insight_counters WHERE app_id = $1 AND kind = $2::"char"`,
    [appId, kind],
  )) as { next_no: number }[];
  return Math.max(8, Math.ceil((rows[0]?.next_no ?? 0) / 8) * 8);
}

/**
 * The CTEs of a day's breakdowns ($1 app, $4 and $5 the day's bounds, $7 the value bound).
 * Each event's values of every dimension (`exprs`, named by `namesParam`) are expanded once;
 * the statistics and the bytes of the user and session bitmaps are aggregated per (mode,
 * dimension, value) first, and the value bound is applied to those few rows after.
 */
function breakdownCtes(namesParam: string, exprs: string[]): string {
  return `${SECRET_CTE},
  ev AS MATERIALIZED (
    SELECT e.is_test_mode, e.float_value, e.anonymous_user_id AS uid, e.session_id AS sid,
           ARRAY[${exprs.join(', ')}] AS vals
      FROM events e
     WHERE e.app_id = $1 AND e.ts >= $4 AND e.ts < $5
  ), ${numbersCte('unos', 'ev', 'uid', 'u')}, ${numbersCte('snos', 'ev', 'sid', 's')},
  x AS MATERIALIZED (
    SELECT ev.is_test_mode, d.dim, coalesce(d.value, '') AS val, d.value IS NULL AS missing,
           ev.float_value, u.no AS uno, s.no AS sno
      FROM ev
      LEFT JOIN unos u ON u.id = ev.uid
      LEFT JOIN snos s ON s.id = ev.sid
     CROSS JOIN LATERAL unnest(${namesParam}, ev.vals) AS d(dim, value)
  ), per AS (
    SELECT is_test_mode, dim, val, missing, count(*) AS events, count(float_value) AS fv_count,
           sum(float_value::numeric) AS fv_sum, min(float_value) AS fv_min, max(float_value) AS fv_max
      FROM x GROUP BY is_test_mode, dim, val, missing
  ), tag0 AS (
    SELECT dim, val, missing,
           (CASE WHEN rn > $7 THEN 2 WHEN missing THEN 1 ELSE 0 END)::smallint AS kind,
           CASE WHEN rn > $7 THEN '' ELSE val END AS value
      FROM (SELECT dim, val, missing,
                   row_number() OVER (PARTITION BY dim ORDER BY sum(events) DESC, missing, val) AS rn
              FROM per GROUP BY dim, val, missing) r
  ), tag AS (
    -- gid: a small integer per row to write, so that the bitmaps' bytes sort on integers.
    SELECT *, dense_rank() OVER (ORDER BY dim, kind, value)::int AS gid FROM tag0
  ), stats AS (
    SELECT p.is_test_mode, t.gid, t.dim, t.kind, t.value, sum(p.events) AS events, sum(p.fv_count) AS fv_count,
           -- least() and greatest() skip a null: a value without float values keeps a null sum.
           greatest(least(sum(p.fv_sum), ${MAX_DOUBLE}), -${MAX_DOUBLE})::double precision AS fv_sum,
           min(p.fv_min) AS fv_min, max(p.fv_max) AS fv_max
      FROM per p JOIN tag t USING (dim, val, missing)
     GROUP BY p.is_test_mode, t.gid, t.dim, t.kind, t.value
  ), xt AS MATERIALIZED (
    SELECT x.is_test_mode, t.gid, x.uno, x.sno FROM x JOIN tag t USING (dim, val, missing)
  ),
  ${bytesCte('ubytes', '(SELECT is_test_mode, gid, uno AS no FROM xt WHERE uno IS NOT NULL) m', 'is_test_mode, gid')},
  ${bytesCte('sbytes', '(SELECT is_test_mode, gid, sno AS no FROM xt WHERE sno IS NOT NULL) m', 'is_test_mode, gid')},
  ${bandCte('ubits', 'ubytes', 'is_test_mode, gid')},
  ${bandCte('sbits', 'sbytes', 'is_test_mode, gid')}`;
}

const BREAKDOWN_INSERT = `
  INSERT INTO insight_breakdowns (app_id, rezone, dimension, day, is_test_mode, kind, value, events,
                                  fv_count, fv_sum, fv_min, fv_max, users_from, users, sessions_from,
                                  sessions, timezone, day_end, computed_at)
  SELECT $1, $2, st.dim, $3::date, st.is_test_mode, st.kind, st.value, st.events, st.fv_count,
         st.fv_sum, st.fv_min, st.fv_max, coalesce(ub.from_no, 0), coalesce(ub.bits, B''),
         coalesce(sb.from_no, 0), coalesce(sb.bits, B''), $6, $5, now()
    FROM stats st
    LEFT JOIN ubits ub USING (is_test_mode, gid)
    LEFT JOIN sbits sb USING (is_test_mode, gid)`;

/**
 * The writes of insights, run by the rollup computation in its transaction: the dense numbers of
 * new users and sessions, each day's user sets per event name and the day's breakdown rows.
 */
@Injectable()
export class InsightComputationRepository {
  /**
   * Memory for the day's aggregates, for the rest of the computation's transaction: a day of a
   * large app groups about a million (dimension, value, member) rows, which would spill to disk
   * under the default work_mem.
   */
  async prepare(runner: Sql): Promise<void> {
    await runner.query(`SET LOCAL work_mem = '${WORK_MEM}'`);
  }

  /** Gives the day's users and sessions not numbered yet the next numbers of the app. */
  async numberNewIds(runner: Sql, appId: string, day: InsightDay): Promise<void> {
    for (const [kind, column] of [
      ['u', 'anonymous_user_id'],
      ['s', 'session_id'],
    ]) {
      await runner.query(
        `WITH ${SECRET_CTE},
         fresh AS (
           SELECT DISTINCT ${idKey('k.s', `e.${column}`)} AS key FROM events e CROSS JOIN k
            WHERE e.app_id = $1 AND e.ts >= $2 AND e.ts < $3 AND e.${column} IS NOT NULL
         ), todo AS (
           SELECT f.key FROM fresh f
            WHERE NOT EXISTS (SELECT 1 FROM insight_ids i
                               WHERE i.app_id = $1 AND i.kind = $4::"char" AND i.key = f.key)
         ), n AS (SELECT count(*)::int AS n FROM todo),
         counter AS (
           INSERT INTO insight_counters (app_id, kind, next_no)
           SELECT $1, $4::"char", n FROM n WHERE n > 0
           ON CONFLICT (app_id, kind) DO UPDATE SET next_no = insight_counters.next_no + EXCLUDED.next_no
           RETURNING next_no
         )
         INSERT INTO insight_ids (app_id, kind, key, no)
         SELECT $1, $4::"char", key,
                (SELECT next_no FROM counter) - (SELECT n FROM n) + (row_number() OVER (ORDER BY key))::int - 1
           FROM todo`,
        [appId, new Date(day.start), new Date(day.end), kind],
      );
    }
  }

  /** Drops the day's rows of one set (served or rezone). */
  async clearDay(runner: Sql, appId: string, day: InsightDay): Promise<void> {
    for (const table of ['insight_day_users', 'insight_breakdowns']) {
      await runner.query(`DELETE FROM ${table} WHERE app_id = $1 AND rezone = $2 AND day = $3::date`, [
        appId,
        day.rezone,
        day.day,
      ]);
    }
  }

  /**
   * The day's user sets: one per mode over every event (`event_name = ''`), and one per mode and
   * event name for the names that have rollup rows that day (the same bound as the rollups).
   */
  async writeDayUsers(runner: Sql, appId: string, day: InsightDay): Promise<void> {
    const rollups = day.rezone ? 'rollups_rezone' : 'rollups';
    await runner.query(
      `WITH ${SECRET_CTE},
       ev AS MATERIALIZED (
         SELECT e.is_test_mode, e.event_name::text AS event_name, e.anonymous_user_id AS uid
           FROM events e
          WHERE e.app_id = $1 AND e.ts >= $4 AND e.ts < $5 AND e.anonymous_user_id IS NOT NULL
       ), ${numbersCte('unos', 'ev', 'uid', 'u')},
       numbered AS MATERIALIZED (
         SELECT ev.is_test_mode, ev.event_name, n.no FROM ev JOIN unos n ON n.id = ev.uid
       ), members AS (
         SELECT is_test_mode, ''::text AS name, no FROM numbered
         UNION ALL
         SELECT is_test_mode, event_name, no FROM numbered
          WHERE event_name IN (SELECT event_name FROM ${rollups}
                                WHERE app_id = $1 AND day = $3::date AND event_name <> '')
       ), ${bytesCte('bytes', 'members', 'is_test_mode, name')},
       ${bandCte('sets', 'bytes', 'is_test_mode, name')}
       INSERT INTO insight_day_users (app_id, rezone, day, is_test_mode, event_name, users_from, users,
                                      timezone, day_end, computed_at)
       SELECT $1, $2, $3::date, is_test_mode, name, from_no, bits, $6, $5, now() FROM sets`,
      [appId, day.rezone, day.day, new Date(day.start), new Date(day.end), day.zone],
    );
  }

  /**
   * The day's breakdown rows for every dimension of the app: per mode and value, the events,
   * float-value statistics, users and sessions. Per dimension, the `maxValues` values with the
   * most events (ties by value) keep their rows; the rest of the day is one row of kind 2.
   */
  async writeBreakdowns(
    runner: Sql,
    appId: string,
    day: InsightDay,
    declared: readonly string[],
    maxValues: number,
  ): Promise<void> {
    const params: unknown[] = [appId, day.rezone, day.day, new Date(day.start), new Date(day.end), day.zone];
    params.push(maxValues);
    const names = dimensionsOf(declared);
    params.push(names);
    const namesParam = `$${params.length}::text[]`;
    let keyIndex = 0;
    const exprs = names.map((name) =>
      dimensionSql(name, () => {
        params.push(declared[keyIndex++]);
        return `$${params.length}::text`;
      }),
    );
    // The joins with the day's few ranked values are hash joins; a merge join would sort every
    // expanded event (seven or more rows per event) by its text value first.
    await runner.query(`SET LOCAL enable_mergejoin = off`);
    await runner.query(`WITH ${breakdownCtes(namesParam, exprs)}${BREAKDOWN_INSERT}`, params);
    await runner.query(`RESET enable_mergejoin`);
  }

  /** The payload keys the app declared as dimensions. */
  async declaredDimensions(runner: Sql, appId: string): Promise<string[]> {
    const rows = (await runner.query(`SELECT dimensions FROM apps WHERE id = $1`, [appId])) as {
      dimensions: string[];
    }[];
    return rows[0]?.dimensions ?? [];
  }

  /** A zone change's new set replaces the served rows from `fromDay` on. */
  async swap(runner: Sql, appId: string, fromDay: string): Promise<void> {
    for (const table of ['insight_day_users', 'insight_breakdowns']) {
      await runner.query(`DELETE FROM ${table} WHERE app_id = $1 AND NOT rezone AND day >= $2::date`, [
        appId,
        fromDay,
      ]);
      await runner.query(`UPDATE ${table} SET rezone = false WHERE app_id = $1 AND rezone`, [appId]);
    }
  }

  /** Drops a zone change's new set built so far. */
  async dropRezone(runner: Sql, appId: string): Promise<void> {
    for (const table of ['insight_day_users', 'insight_breakdowns']) {
      await runner.query(`DELETE FROM ${table} WHERE app_id = $1 AND rezone`, [appId]);
    }
  }

  /**
   * Erasure: clears the users' bits in every kept set of the app and forgets their numbers, in
   * one transaction. Sets that hold none of them are left as they are.
   */
  async forgetUsers(runner: QueryRunner, appId: string, userIds: string[]): Promise<void> {
    if (!userIds.length) return;
    await runner.startTransaction('READ COMMITTED');
    try {
      const mask = await this.userMask(runner, appId, userIds);
      if (mask) {
        // The mask's bits over the band of each set: numbers users_from to users_from + length - 1.
        const band = `substring($2::varbit || 0::bit(${mask.pad}) FROM users_from + 1 FOR length(users))`;
        for (const table of ['insight_day_users', 'insight_breakdowns']) {
          await runner.query(
            `UPDATE ${table} SET users = users & ~${band}
              WHERE app_id = $1 AND bit_count(users & ${band}) > 0`,
            [appId, mask.bits],
          );
        }
        await runner.query(
          `WITH ${SECRET_CTE}
           DELETE FROM insight_ids WHERE app_id = $1 AND kind = 'u'
              AND key IN (SELECT ${idKey('k.s', 'u')} FROM k, unnest($2::text[]) AS u)`,
          [appId, userIds],
        );
      }
      await runner.commitTransaction();
    } catch (err) {
      await runner.rollbackTransaction().catch(() => undefined);
      throw err;
    }
  }

  /**
   * The users' numbers as one bitmap (text of 0s and 1s), and the zero bits to append so that it
   * is at least as long as any set of the app; null when none of them is numbered.
   */
  private async userMask(
    runner: Sql,
    appId: string,
    userIds: string[],
  ): Promise<{ bits: string; pad: number } | null> {
    const rows = (await runner.query(
      `WITH ${SECRET_CTE}
       SELECT no FROM insight_ids WHERE app_id = $1 AND kind = 'u'
          AND key IN (SELECT ${idKey('k.s', 'u')} FROM k, unnest($2::text[]) AS u)`,
      [appId, userIds],
    )) as { no: number }[];
    if (!rows.length) return null;
    const length = Math.max(...rows.map((r) => r.no)) + 1;
    const bits = new Array<string>(length).fill('0');
    for (const { no } of rows) bits[no] = '1';
    return { bits: bits.join(''), pad: await bitmapLength(runner, appId, 'u') };
  }
}
