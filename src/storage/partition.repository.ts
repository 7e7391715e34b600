import { DAY_MS, utcDateString } from '@app/common/time';
import { Injectable, Optional } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { ADVISORY_LOCKS } from '@app/database/advisory-locks';
import { sqlState } from '@app/database/transient-error';
import { CitusCluster } from '@app/database/citus';
import { EVENT_COLUMN as c } from '@app/common/events/event-fields';

const PARTITION_NAME = /^events_p(\d{4})(\d{2})(\d{2})$/;

function dayName(day: Date): string {
  return `events_p${utcDateString(day.getTime()).replace(/-/g, '')}`;
}

/**
 * The user, session and event-name lookups of a day that ingest still writes: a BRIN index whose
 * summary of each 8-page block range (a few hundred events) holds a bloom filter of the
 * range's session ids, one of its user ids, one of its event names, and the range's first and
 * last receive time. A B-tree per filter would cost every insert a descent and a leaf write
 * (docs/performance.md); days that have
 * ended get those B-trees instead. A name in most ranges is read from the newest-first index,
 * which finds a page of it after a few rows; the bloom filter serves the rare names. An insert into
 * a range that is not summarized yet costs a look in the range map and nothing else; the
 * maintenance task summarizes the ranges ingest has filled every few seconds. A lookup reads
 * every summary (about 1,000 pages for a 2-million-event day) and then every row of the ranges
 * whose filters may hold the value. Each filter is sized for 300 distinct values at a 0.1 %
 * false-positive rate, since ids are nearly unique within a range; fewer bits fill the filters
 * and make most ranges match.
 *
 * 8 pages per range rather than 16: an id whose events are spread over the whole day matches a
 * range per event, and its read rechecks all of their rows, so smaller ranges recheck fewer
 * (the figures are in docs/performance.md, "Figures behind the code").
 *
 * The receive time is there for the planner. It costs a BRIN scan by the best correlation between
 * heap order and an indexed column that the query names, and session and user ids have none, so
 * it would cost the lookup as a read of the whole day. The read path adds a receive-time
 * condition that every row meets (src/events/event.repository.ts), and the planner then costs it
 * as the narrow read it is. BRIN and its bloom operator classes are part of PostgreSQL (14 and
 * later): no extension is needed.
 */
const BLOOM_OPS = 'text_bloom_ops(n_distinct_per_range = 300, false_positive_rate = 0.001)';
const PAGES_PER_RANGE = 8;
const LOOKUP =
  `USING brin (${c.receivedAt}, ${c.sessionId} ${BLOOM_OPS}, ${c.anonymousUserId} ${BLOOM_OPS}, ` +
  `${c.eventName} ${BLOOM_OPS}) ` +
  `WITH (pages_per_range = ${PAGES_PER_RANGE})`;

/**
 * Where the ranges that ingest has filled end, for a table of `blocks` blocks: before the range
 * being filled (the last block's) and the one before it, which a concurrent insert may still be
 * finishing. An insert into a summarized range must rewrite the range's summary (its filters,
 * logged whole), while one into a range without a summary costs nothing.
 */
export function filledRangesEnd(blocks: number): number {
  const lastRange = Math.floor((blocks - 1) / PAGES_PER_RANGE) * PAGES_PER_RANGE;
  return Math.max(0, lastRange - PAGES_PER_RANGE);
}

/** The name of a partition's lookup index, and of the bloom index that an earlier version built. */
const lookupIndex = (partition: string) => `${partition}_lookup`;
const legacyBloomIndex = (partition: string) => `${partition}_bloom`;

/** The B-tree of one filter column on a day that has ended. */
const filterTree = (column: string) =>
  `(${c.appId}, ${column}, ${c.receivedAt} DESC, ${c.id} DESC) WHERE ${column} IS NOT NULL`;
/**
 * The eventName B-tree of a day that has ended: the definition the partitioned table's index
 * had (the event name is never null), so that a migration back can attach these.
 */
const NAME_TREE = `(${c.appId}, ${c.eventName}, ${c.receivedAt} DESC, ${c.id} DESC)`;

/**
 * Runs a CREATE … IF NOT EXISTS that another instance may be running at the same moment: IF NOT
 * EXISTS does not cover that race, and the loser sees duplicate_table (42P07) or a unique
 * violation (23505).
 */
async function ignoreCreateRace(create: () => Promise<unknown>): Promise<void> {
  try {
    await create();
  } catch (err) {
    const code = sqlState(err);
    if (code !== '42P07' && code !== '23505') throw err;
  }
}

const INDEX_LOCK_ID = ADVISORY_LOCKS.partitionIndexes;

/**
 * The BRIN indexes of one table, for a command that Citus runs on each shard of a partition
 * (`%1$s` is the shard): the coordinator's partition is an empty shell, so BRIN upkeep there would
 * do nothing, and the shards' indexes have names of their own.
 */
const SHARD_BRIN_INDEXES = `SELECT i.indexrelid FROM pg_index i
  JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam
 WHERE am.amname = 'brin' AND i.indrelid = '%1$s'::regclass`;

/** On each shard: forget the summary of the first range (see `create`). */
const SHARD_DESUMMARIZE = `SELECT count(brin_desummarize_range(x.indexrelid, 0))
  FROM (${SHARD_BRIN_INDEXES}) x`;

/** On each shard: summarize the ranges ingest has filled there (as filledRangesEnd). */
const SHARD_SUMMARIZE = `SELECT coalesce(sum(brin_summarize_range(x.indexrelid, b)), 0)
  FROM (${SHARD_BRIN_INDEXES}) x,
       LATERAL (SELECT pg_relation_size('%1$s'::regclass) / current_setting('block_size')::int AS blocks) s,
       LATERAL generate_series(0::bigint,
         greatest(0, floor((s.blocks - 1) / ${PAGES_PER_RANGE}.0)::bigint * ${PAGES_PER_RANGE} - ${PAGES_PER_RANGE}) - 1,
         ${PAGES_PER_RANGE}) AS b`;

/** DDL for the daily partitions of `events`. Partition bounds are UTC days. */
@Injectable()
export class PartitionRepository {
  private readonly onCitus: boolean;

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @Optional() citus?: CitusCluster,
  ) {
    this.onCitus = citus?.enabled ?? false;
  }

  /** Runs `command` on every shard of `partition` (Citus); returns the sum of their numeric results. */
  private async onShards(partition: string, command: string): Promise<number> {
    const rows = (await this.db.query(
      `SELECT coalesce(sum(result::bigint) FILTER (WHERE success), 0)::int AS total,
              string_agg(result, '; ') FILTER (WHERE NOT success) AS failed
         FROM run_command_on_shards($1, $2)`,
      [partition, command],
    )) as { total: number; failed: string | null }[];
    if (rows[0].failed) throw new Error(`BRIN upkeep of ${partition} failed on a shard: ${rows[0].failed}`);
    return rows[0].total;
  }

  /** Names and first days of the existing partitions, oldest first. */
  async list(): Promise<{ name: string; day: string }[]> {
    const rows = (await this.db.query(
      `SELECT c.relname AS name
         FROM pg_inherits i
         JOIN pg_class c ON c.oid = i.inhrelid
         JOIN pg_class p ON p.oid = i.inhparent
        WHERE p.relname = 'events'
        ORDER BY c.relname`,
    )) as { name: string }[];
    return rows
      .map((r) => ({ name: r.name, m: PARTITION_NAME.exec(r.name) }))
      .filter((r) => r.m)
      .map((r) => ({ name: r.name, day: `${r.m![1]}-${r.m![2]}-${r.m![3]}` }));
  }

  /**
   * Creates the partition of one UTC day if it does not exist (safe to race). With `lookups`,
   * the new, empty partition gets its lookup index for the user, session and event-name filters
   * at once, before ingest writes to it.
   */
  async create(day: Date, { lookups = false }: { lookups?: boolean } = {}): Promise<void> {
    const name = dayName(day);
    const start = utcDateString(day.getTime());
    const end = utcDateString(day.getTime() + DAY_MS);
    await ignoreCreateRace(() =>
      this.db.query(
        `CREATE TABLE IF NOT EXISTS ${name} PARTITION OF events
           FOR VALUES FROM ('${start} 00:00:00+00') TO ('${end} 00:00:00+00')`,
      ),
    );
    if (lookups) {
      await ignoreCreateRace(() =>
        this.db.query(`CREATE INDEX IF NOT EXISTS ${lookupIndex(name)} ON ${name} ${LOOKUP}`),
      );
      // Building the index on the empty table summarizes its first range as empty, and each of
      // the day's first ~280 inserts would then rewrite that summary. Without one they cost
      // nothing, and the summary pass summarizes the range once ingest has filled it.
      if (this.onCitus) await this.onShards(name, SHARD_DESUMMARIZE);
      else await this.db.query(`SELECT brin_desummarize_range($1::regclass, 0)`, [lookupIndex(name)]);
    }
  }

  /**
   * Runs `fn` while this instance holds the index upkeep lock, or returns null at once when
   * another instance holds it. Instances run the same upkeep on the same schedule; without the
   * lock, one could drop as invalid an index that another is still building. Waiting for the
   * lock instead would deadlock: CREATE INDEX CONCURRENTLY waits for every running statement,
   * the wait for the lock included.
   */
  async withIndexLock<T>(fn: () => Promise<T>): Promise<T | null> {
    const runner = this.db.createQueryRunner();
    await runner.connect();
    try {
      const [{ locked }] = (await runner.query('SELECT pg_try_advisory_lock($1) AS locked', [
        INDEX_LOCK_ID,
      ])) as { locked: boolean }[];
      if (!locked) return null;
      try {
        return await fn();
      } finally {
        await runner.query('SELECT pg_advisory_unlock($1)', [INDEX_LOCK_ID]);
      }
    } finally {
      await runner.release();
    }
  }

  /**
   * Adds the lookup index for the user, session and event-name filters to a partition that
   * ingest still writes, without blocking writes (for partitions made before the index existed),
   * then drops the bloom index that an earlier version used instead. Returns the names of the
   * indexes it built.
   */
  async indexLookups(name: string): Promise<string[]> {
    const built = await this.ensureIndexes(name, { [lookupIndex(name)]: LOOKUP });
    await this.db.query(`DROP INDEX CONCURRENTLY IF EXISTS ${legacyBloomIndex(name)}`);
    return built;
  }

  /**
   * Adds the user, session and event-name filter B-trees to one partition, without blocking
   * writes, then drops its lookup index, which they replace. Returns the names of the indexes it
   * built.
   */
  async indexFilters(name: string): Promise<string[]> {
    const built = await this.ensureIndexes(name, {
      [`${name}_user`]: filterTree(c.anonymousUserId),
      [`${name}_session`]: filterTree(c.sessionId),
      [`${name}_name`]: NAME_TREE,
    });
    await this.db.query(`DROP INDEX CONCURRENTLY IF EXISTS ${lookupIndex(name)}`);
    await this.db.query(`DROP INDEX CONCURRENTLY IF EXISTS ${legacyBloomIndex(name)}`);
    return built;
  }

  /**
   * The valid lookup indexes of the partitions, with the size of their tables in blocks. On Citus,
   * the blocks of all of a partition's shards: a figure that grows as they fill.
   */
  async lookupIndexes(): Promise<{ index: string; blocks: number }[]> {
    const size = this.onCitus ? 'citus_relation_size' : 'pg_relation_size';
    const rows = (await this.db.query(
      `SELECT c.relname AS index,
              ${size}(i.indrelid) / current_setting('block_size')::int AS blocks
         FROM pg_index i
         JOIN pg_class c ON c.oid = i.indexrelid
         JOIN pg_inherits h ON h.inhrelid = i.indrelid
         JOIN pg_class p ON p.oid = h.inhparent
        WHERE p.relname = 'events' AND i.indisvalid AND c.relname LIKE '%\\_lookup'
        ORDER BY c.relname`,
    )) as { index: string; blocks: string }[];
    return rows.map((r) => ({ index: r.index, blocks: Number(r.blocks) }));
  }

  /**
   * Summarizes the block ranges of one lookup index that start in [fromBlock, toBlock), one
   * `brin_summarize_range` each (`brin_summarize_new_values` would also summarize the range being
   * filled); a range that already has a summary costs a look in the range map. Returns how many
   * it summarized, or null when the table lock is held (by autovacuum, which summarizes completed
   * ranges itself, an index build or another instance's pass) for longer than `lockTimeoutMs`, or
   * the index is gone.
   */
  async summarizeRanges(
    index: string,
    fromBlock: number,
    toBlock: number,
    lockTimeoutMs: number,
  ): Promise<number | null> {
    // On Citus each shard summarizes the ranges filled in it, whatever the blocks given here.
    if (this.onCitus) return this.summarizeShards(index);
    try {
      return await this.db.transaction(async (tx) => {
        await tx.query(`SELECT set_config('lock_timeout', $1, true)`, [`${lockTimeoutMs}ms`]);
        const [{ ranges }] = (await tx.query(
          `SELECT coalesce(sum(brin_summarize_range($1::regclass, b)), 0)::int AS ranges
             FROM generate_series($2::bigint, $3::bigint - 1, $4::int) AS b`,
          [index, fromBlock, toBlock, PAGES_PER_RANGE],
        )) as { ranges: number }[];
        return ranges;
      });
    } catch (err) {
      // 55P03 lock_not_available; 42P01 and 42704: the partition or its index is gone since the
      // list was read.
      const code = sqlState(err);
      if (code === '55P03' || code === '42P01' || code === '42704') return null;
      throw err;
    }
  }

  private async summarizeShards(index: string): Promise<number | null> {
    const partition = index.replace(/_lookup$/, '');
    if (!PARTITION_NAME.test(partition)) throw new Error(`not a lookup index: ${index}`);
    try {
      return await this.onShards(partition, SHARD_SUMMARIZE);
    } catch (err) {
      const code = sqlState(err);
      if (code === '42P01' || code === '42704') return null;
      throw err;
    }
  }

  /**
   * Builds each wanted index of a partition (name → definition after `ON <partition>`) that is
   * not there and valid. An index left invalid by an interrupted build is dropped and built again.
   */
  private async ensureIndexes(name: string, wanted: Record<string, string>): Promise<string[]> {
    if (!PARTITION_NAME.test(name)) throw new Error(`not an events partition: ${name}`);
    const rows = (await this.db.query(
      `SELECT c.relname AS name, i.indisvalid AS valid
         FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE c.relname = ANY($1)`,
      [Object.keys(wanted)],
    )) as { name: string; valid: boolean }[];
    const state = new Map(rows.map((r) => [r.name, r.valid]));
    const built: string[] = [];
    for (const [index, definition] of Object.entries(wanted)) {
      if (state.get(index) === true) continue;
      if (state.get(index) === false) await this.db.query(`DROP INDEX CONCURRENTLY IF EXISTS ${index}`);
      await this.db.query(`CREATE INDEX CONCURRENTLY IF NOT EXISTS ${index} ON ${name} ${definition}`);
      built.push(index);
    }
    return built;
  }

  async drop(name: string): Promise<void> {
    if (!PARTITION_NAME.test(name)) throw new Error(`not an events partition: ${name}`);
    await this.db.query(`DROP TABLE IF EXISTS ${name}`);
  }
}
