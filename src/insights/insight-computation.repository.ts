import { Injectable } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import { byteaArray, withoutMembers } from './member-lists';

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
export type Sql = { query(sql: string, params?: unknown[]): Promise<unknown> };

const WORK_MEM = '128MB';

/** The tables of a day's sets, each row with the time it was computed (`computed_at`, `day_end`). */
export const SET_TABLES = ['insight_day_users', 'insight_breakdowns'] as const;

/** The tables with rows per (app, set, local day): a zone change swaps and drops them together. */
const DAY_TABLES = [...SET_TABLES, 'insight_day_sources'];

/**
 * The key of an id: the first 16 bytes of SHA-256 over the app's secret and the id. `secret` is
 * an expression of the app's pii_secret.
 */
export function idKey(secret: string, id: string): string {
  return `substring(sha256(${secret} || convert_to(${id}, 'UTF8')) FOR 16)`;
}

/*
 * The numbered ids of an app are packed (insight_id_packs): the pack of a key is its first two
 * bytes, and the pack's `entries` hold each of its ids as the key's other 14 bytes and then the
 * number (int4, big-endian), ENTRY_BYTES an id, in the order they were numbered.
 */
const ENTRY_BYTES = 18;
const TAIL_BYTES = 14;

/** Packs per kind: a pack is a key's first two bytes. */
const PACKS = 65_536;

/**
 * Heap bytes of a pack row beside its entries: the tuple header and line pointer, app_id, kind,
 * pack and the entries' length word, aligned.
 */
const PACK_ROW_BYTES = 56;

/** The least space worth rewriting the packs' table for. */
const COMPACT_SLACK_BYTES = 8 * 1_048_576;

/** The pack of a key expression. */
export function packOf(key: string): string {
  return `((get_byte(${key}, 0) << 8) | get_byte(${key}, 1))`;
}

/** A key's part stored in its pack's entries. */
export function tailOf(key: string): string {
  return `substring(${key} FROM 3)`;
}

/** The entry of an id: its key's tail, then its number. */
export function entryOf(key: string, no: string): string {
  return `${tailOf(key)} || int4send(${no})`;
}

/** The number stored at the 0-based byte `offset` of `entries`. */
function numberAt(entries: string, offset: string): string {
  return `((get_byte(${entries}, ${offset}) << 24) | (get_byte(${entries}, ${offset} + 1) << 16)
           | (get_byte(${entries}, ${offset} + 2) << 8) | get_byte(${entries}, ${offset} + 3))`;
}

/**
 * The number of the key whose tail is `tail` in the pack `entries`, where `at` is
 * `position(tail IN entries)` (null when the key has none). The first place the tail appears is
 * its entry but for a chance of 2⁻¹¹² per byte of the pack; should it start inside another entry,
 * the entries are compared one by one, so the answer is exact either way.
 */
export function packedNumber(entries: string, tail: string, at: string): string {
  return `CASE WHEN ${at} IS NULL OR ${at} = 0 THEN NULL
               WHEN ${at} % ${ENTRY_BYTES} = 1 THEN ${numberAt(entries, `${at} + ${TAIL_BYTES - 1}`)}
               ELSE (SELECT ${numberAt(entries, `i * ${ENTRY_BYTES} + ${TAIL_BYTES}`)}
                       FROM generate_series(0, length(${entries}) / ${ENTRY_BYTES} - 1) AS i
                      WHERE substring(${entries} FROM i * ${ENTRY_BYTES} + 1 FOR ${TAIL_BYTES}) = ${tail}
                      LIMIT 1)
          END`;
}

/** `entries` without the entries whose tails are in `tails` (a bytea[] expression). */
function entriesWithout(entries: string, tails: string): string {
  return `(SELECT coalesce(string_agg(substring(${entries} FROM i * ${ENTRY_BYTES} + 1 FOR ${ENTRY_BYTES}), ''::bytea ORDER BY i), ''::bytea)
             FROM generate_series(0, length(${entries}) / ${ENTRY_BYTES} - 1) AS i
            WHERE substring(${entries} FROM i * ${ENTRY_BYTES} + 1 FOR ${TAIL_BYTES}) <> ALL (${tails}))`;
}

/**
 * The numbers of the app's users among `$2` (text[]), as a CTE `nos` (column no) after the CTEs
 * `k` (the secret) and `u` (the keys). $1 is the app id.
 */
const USER_NUMBERS = `u AS (SELECT DISTINCT ${idKey('k.s', 'id')} AS key FROM k, unnest($2::text[]) AS id),
  found AS (
    SELECT p.entries, ${tailOf('u.key')} AS tail, position(${tailOf('u.key')} IN p.entries) AS at
      FROM u JOIN insight_id_packs p ON p.app_id = $1 AND p.kind = 'u' AND p.pack = ${packOf('u.key')}
    OFFSET 0
  ), nos AS (SELECT ${packedNumber('entries', 'tail', 'at')} AS no FROM found)`;

// The app's secret, as a CTE `k` of one row, for statements whose $1 is the app id.
const SECRET_CTE = `k AS (SELECT pii_secret AS s FROM apps WHERE id = $1)`;

/**
 * The SQL bitmap `bits` made `length` bits long: zeros appended, then cut. `pad` (a number, at
 * least as large as any bitmap's length, see bitmapLength) is how many zeros are appended first,
 * as a bit type takes its length as a constant. `bit_or`, `&` and `|` need equal lengths.
 */
export function paddedBitmap(bits: string, pad: number, length: string): string {
  return `substring(${bits} || 0::bit(${pad}) FOR ${length})`;
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
 * The writes of insights around the day's computation (insight-day.repository.ts), run by the
 * rollup computation in its transaction: the transaction's settings, a zone change's swap and
 * restart, and erasure.
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
    // Floats leave the day's statement as text and come back in the next: shortest exact digits.
    await runner.query(`SET LOCAL extra_float_digits = 3`);
  }

  /**
   * Rewrites the table of id packs (`VACUUM FULL`) when it takes more than `percent` % of what
   * its rows hold, and `slackBytes` more; `percent` 0 never does. What the rows hold is reckoned
   * from the counters, every number ever given as one entry (erased ones too, so never less
   * than the truth). A pack is rewritten each time its ids grow: computing months of history in
   * one run leaves about as much free space in the table as its rows hold, which vacuum makes
   * reusable but never returns. Only the rollup computation and erasure read or write the packs,
   * both under the lock the caller holds, so the table's exclusive lock stops nothing else; one held
   * elsewhere (a dump) is waited for 5 s at most. Runs outside a transaction. Gives the sizes
   * before and after, or null when the table was left as it is. On Citus the coordinator's table
   * is empty (the rows are in its shards), so it is always left to autovacuum.
   */
  async compactIdPacks(
    runner: Sql,
    percent: number,
    slackBytes = COMPACT_SLACK_BYTES,
  ): Promise<{ before: number; after: number } | null> {
    if (percent <= 0) return null;
    const [sizes] = (await runner.query(
      `SELECT pg_total_relation_size('insight_id_packs')::float8 AS table_bytes,
              pg_relation_size('insight_id_packs')::float8 AS heap,
              (SELECT coalesce(sum(next_no::float8 * ${ENTRY_BYTES} + least(next_no, ${PACKS})::float8 * ${PACK_ROW_BYTES}), 0)
                 FROM insight_counters)::float8 AS content`,
    )) as { table_bytes: number; heap: number; content: number }[];
    if (sizes.heap <= (sizes.content * percent) / 100 || sizes.heap - sizes.content <= slackBytes)
      return null;
    await runner.query(`SET lock_timeout = '5s'`);
    try {
      await runner.query(`VACUUM (FULL) insight_id_packs`);
    } finally {
      await runner.query(`RESET lock_timeout`);
    }
    const [after] = (await runner.query(
      `SELECT pg_total_relation_size('insight_id_packs')::float8 AS table_bytes`,
    )) as { table_bytes: number }[];
    return { before: sizes.table_bytes, after: after.table_bytes };
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
    for (const table of DAY_TABLES) {
      await runner.query(`DELETE FROM ${table} WHERE app_id = $1 AND NOT rezone AND day >= $2::date`, [
        appId,
        fromDay,
      ]);
      await runner.query(`UPDATE ${table} SET rezone = false WHERE app_id = $1 AND rezone`, [appId]);
    }
  }

  /** Drops a zone change's new set built so far. */
  async dropRezone(runner: Sql, appId: string): Promise<void> {
    for (const table of DAY_TABLES) {
      await runner.query(`DELETE FROM ${table} WHERE app_id = $1 AND rezone`, [appId]);
    }
  }

  /**
   * Erasure: takes the users out of every kept set of the app and forgets their numbers (their
   * entries leave their packs), in one transaction. Sets that hold none of them are left as they are. The day sets are bitmaps and
   * lose the users' bits in SQL; the days whose sets held one of them are the days whose
   * breakdown lists can, and only those lists are read and rewritten (member-lists.ts).
   */
  async forgetUsers(runner: QueryRunner, appId: string, userIds: string[]): Promise<void> {
    if (!userIds.length) return;
    await runner.startTransaction('READ COMMITTED');
    try {
      const mask = await this.userMask(runner, appId, userIds);
      if (mask) {
        const erased = paddedBitmap('$2::varbit', mask.pad, 'length(users)');
        const held = `app_id = $1 AND bit_count(users & ${erased}) > 0`;
        const days = (await runner.query(
          `SELECT DISTINCT rezone, day::text AS day FROM insight_day_users WHERE ${held}`,
          [appId, mask.bits],
        )) as { rezone: boolean; day: string }[];
        for (const day of days) await this.forgetInBreakdowns(runner, appId, day, mask.numbers);
        await runner.query(
          `UPDATE insight_day_users SET users = users & ~${erased}
            WHERE ${held}`,
          [appId, mask.bits],
        );
        await runner.query(
          `WITH ${SECRET_CTE}, u AS (SELECT DISTINCT ${idKey('k.s', 'id')} AS key FROM k, unnest($2::text[]) AS id)
           UPDATE insight_id_packs p
              SET entries = ${entriesWithout('p.entries', `ARRAY(SELECT ${tailOf('u.key')} FROM u WHERE ${packOf('u.key')} = p.pack)`)}
            WHERE p.app_id = $1 AND p.kind = 'u' AND p.pack IN (SELECT ${packOf('key')} FROM u)`,
          [appId, userIds],
        );
      }
      await runner.commitTransaction();
    } catch (err) {
      await runner.rollbackTransaction().catch(() => undefined);
      throw err;
    }
  }

  /** Rewrites the day's breakdown lists that hold one of `numbers`, without them. */
  private async forgetInBreakdowns(
    runner: Sql,
    appId: string,
    day: { rezone: boolean; day: string },
    numbers: ReadonlySet<number>,
  ): Promise<void> {
    const rows = (await runner.query(
      `SELECT dimension, is_test_mode AS m, kind, value, users FROM insight_breakdowns
        WHERE app_id = $1 AND rezone = $2 AND day = $3::date`,
      [appId, day.rezone, day.day],
    )) as { dimension: string; m: boolean; kind: number; value: string; users: Buffer }[];
    const changed = rows
      .map((r) => ({ ...r, users: withoutMembers(r.users, numbers) }))
      .filter((r): r is typeof r & { users: Buffer } => r.users !== null);
    if (!changed.length) return;
    await runner.query(
      `UPDATE insight_breakdowns t SET users = r.users
         FROM unnest($4::text[], $5::boolean[], $6::smallint[], $7::text[], $8::bytea[]) AS r(d, m, k, v, users)
        WHERE t.app_id = $1 AND t.rezone = $2 AND t.day = $3::date
          AND t.dimension = r.d AND t.is_test_mode = r.m AND t.kind = r.k AND t.value = r.v`,
      [
        appId,
        day.rezone,
        day.day,
        changed.map((r) => r.dimension),
        changed.map((r) => r.m),
        changed.map((r) => r.kind),
        changed.map((r) => r.value),
        byteaArray(changed.map((r) => r.users)),
      ],
    );
  }

  /**
   * The users' numbers, as a set and as one bitmap (text of 0s and 1s), and the zero bits to
   * append so that the bitmap is at least as long as any set of the app; null when none of them
   * is numbered.
   */
  private async userMask(
    runner: Sql,
    appId: string,
    userIds: string[],
  ): Promise<{ numbers: Set<number>; bits: string; pad: number } | null> {
    const rows = (await runner.query(
      `WITH ${SECRET_CTE}, ${USER_NUMBERS}
       SELECT no FROM nos WHERE no IS NOT NULL`,
      [appId, userIds],
    )) as { no: number }[];
    if (!rows.length) return null;
    const length = Math.max(...rows.map((r) => r.no)) + 1;
    const bits = new Array<string>(length).fill('0');
    for (const { no } of rows) bits[no] = '1';
    return {
      numbers: new Set(rows.map((r) => r.no)),
      bits: bits.join(''),
      pad: await bitmapLength(runner, appId, 'u'),
    };
  }
}
