import { Injectable } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import { dimensionSql, dimensionsOf } from './dimensions';
import { EVENT_COLUMN as c } from '@app/common/events/event-fields';

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
 * Two CTEs that turn `members` (the key columns `keys` and a dense number `no`) into one bitmap
 * per key, `<name>`: bit n is set when number n is a member. Built as hexadecimal text, a byte
 * per eight numbers, the gaps filled with zero bytes, so the cost follows the members, not the
 * bitmap's length. A member listed twice sets its bit twice: `members` need not be distinct.
 */
function bitmapCtes(name: string, members: string, keys: string): string {
  return `
  ${name}_bytes AS (
    SELECT ${keys}, no >> 3 AS b, bit_or(1 << (7 - (no & 7))) AS v FROM ${members} GROUP BY ${keys}, no >> 3
  ),
  ${name} AS (
    SELECT ${keys},
           ('x' || string_agg(repeat('00', gap) || lpad(to_hex(v), 2, '0'), '' ORDER BY b))::varbit AS bits
      FROM (SELECT *, (b - coalesce(lag(b) OVER (PARTITION BY ${keys} ORDER BY b), -1) - 1)::int AS gap
              FROM ${name}_bytes) g
     GROUP BY ${keys}
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
      ['u', c.anonymousUserId],
      ['s', c.sessionId],
    ]) {
      await runner.query(
        `WITH ${SECRET_CTE},
         fresh AS (
           SELECT DISTINCT ${idKey('k.s', `e.${column}`)} AS key FROM events e CROSS JOIN k
            WHERE e.${c.appId} = $1 AND e.${c.timestamp} >= $2 AND e.${c.timestamp} < $3 AND e.${column} IS NOT NULL
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
       ev AS (
         SELECT e.${c.isTestMode} AS is_test_mode, e.${c.eventName}::text AS event_name, i.no
           FROM events e
          CROSS JOIN k
           JOIN insight_ids i
             ON i.app_id = $1 AND i.kind = 'u' AND i.key = ${idKey('k.s', `e.${c.anonymousUserId}`)}
          WHERE e.${c.appId} = $1 AND e.${c.timestamp} >= $4 AND e.${c.timestamp} < $5
       ), members AS (
         SELECT is_test_mode, ''::text AS name, no FROM ev
         UNION ALL
         SELECT is_test_mode, event_name, no FROM ev
          WHERE event_name IN (SELECT event_name FROM ${rollups}
                                WHERE app_id = $1 AND day = $3::date AND event_name <> '')
       ), ${bitmapCtes('sets', 'members', 'is_test_mode, name')}
       INSERT INTO insight_day_users (app_id, rezone, day, is_test_mode, event_name, users, timezone,
                                      day_end, computed_at)
       SELECT $1, $2, $3::date, is_test_mode, name, bits, $6, $5, now() FROM sets`,
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
    await runner.query(
      `WITH ${SECRET_CTE},
       ev AS (
         SELECT e.${c.isTestMode} AS is_test_mode, e.${c.floatValue} AS fv, u.no AS uno, s.no AS sno, d.dim, d.value
           FROM events e
          CROSS JOIN k
           LEFT JOIN insight_ids u
             ON u.app_id = $1 AND u.kind = 'u' AND u.key = ${idKey('k.s', `e.${c.anonymousUserId}`)}
           LEFT JOIN insight_ids s
             ON s.app_id = $1 AND s.kind = 's' AND s.key = ${idKey('k.s', `e.${c.sessionId}`)}
          CROSS JOIN LATERAL unnest(${namesParam}, ARRAY[${exprs.join(', ')}]) AS d(dim, value)
          WHERE e.${c.appId} = $1 AND e.${c.timestamp} >= $4 AND e.${c.timestamp} < $5
       ), ranked AS (
         SELECT dim, coalesce(value, '') AS v, value IS NULL AS missing,
                row_number() OVER (PARTITION BY dim ORDER BY count(*) DESC, value NULLS LAST) AS rn
           FROM ev GROUP BY dim, value
       ), tagged AS (
         SELECT ev.is_test_mode, ev.dim, ev.fv, ev.uno, ev.sno,
                (CASE WHEN r.rn > $7 THEN 2 WHEN r.missing THEN 1 ELSE 0 END)::smallint AS kind,
                CASE WHEN r.rn > $7 THEN '' ELSE r.v END AS value
           FROM ev JOIN ranked r
             ON r.dim = ev.dim AND r.v = coalesce(ev.value, '') AND r.missing = (ev.value IS NULL)
       ), stats AS (
         SELECT is_test_mode, dim, kind, value, count(*) AS events, count(fv) AS fv_count,
                -- least() and greatest() skip a null: a value without float values keeps a null sum.
                CASE WHEN count(fv) > 0
                     THEN greatest(least(sum(fv::numeric), ${MAX_DOUBLE}), -${MAX_DOUBLE})::double precision
                END AS fv_sum,
                min(fv) AS fv_min, max(fv) AS fv_max
           FROM tagged GROUP BY is_test_mode, dim, kind, value
       ),
       umembers AS (SELECT is_test_mode, dim, kind, value, uno AS no FROM tagged WHERE uno IS NOT NULL),
       smembers AS (SELECT is_test_mode, dim, kind, value, sno AS no FROM tagged WHERE sno IS NOT NULL),
       ${bitmapCtes('ubits', 'umembers', 'is_test_mode, dim, kind, value')},
       ${bitmapCtes('sbits', 'smembers', 'is_test_mode, dim, kind, value')}
       INSERT INTO insight_breakdowns (app_id, rezone, dimension, day, is_test_mode, kind, value, events,
                                       fv_count, fv_sum, fv_min, fv_max, users, sessions, timezone,
                                       day_end, computed_at)
       SELECT $1, $2, st.dim, $3::date, st.is_test_mode, st.kind, st.value, st.events, st.fv_count,
              st.fv_sum, st.fv_min, st.fv_max, coalesce(ub.bits, B''), coalesce(sb.bits, B''), $6, $5, now()
         FROM stats st
         LEFT JOIN ubits ub USING (is_test_mode, dim, kind, value)
         LEFT JOIN sbits sb USING (is_test_mode, dim, kind, value)`,
      params,
    );
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
        for (const table of ['insight_day_users', 'insight_breakdowns']) {
          await runner.query(
            `UPDATE ${table} SET users = users & ~substring($2::varbit || 0::bit(${mask.pad}) FOR length(users))
              WHERE app_id = $1
                AND bit_count(users & substring($2::varbit || 0::bit(${mask.pad}) FOR length(users))) > 0`,
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
