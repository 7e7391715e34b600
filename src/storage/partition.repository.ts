import { DAY_MS, utcDateString } from '@app/common/time';
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { ADVISORY_LOCKS } from '@app/database/advisory-locks';
import { sqlState } from '@app/database/transient-error';

const PARTITION_NAME = /^events_p(\d{4})(\d{2})(\d{2})$/;

function dayName(day: Date): string {
  return `events_p${utcDateString(day.getTime()).replace(/-/g, '')}`;
}

/**
 * The user and session lookups of a day that ingest still writes: one bloom signature per row
 * over both columns (96 bits, 4 per column), about 18 bytes a row. It is filled in insert order,
 * so an event costs a hash and an append instead of two random B-tree descents, and a lookup
 * reads the signatures (about a tenth of the day's heap) and then the few rows that match
 * (docs/performance.md).
 */
const BLOOM = 'USING bloom (session_id, anonymous_user_id) WITH (length = 96, col1 = 4, col2 = 4)';

/** The B-tree of one filter column on a day that has ended. */
const filterTree = (column: string) =>
  `(app_id, ${column}, received_at DESC, id DESC) WHERE ${column} IS NOT NULL`;

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

/** DDL for the daily partitions of `events`. Partition bounds are UTC days. */
@Injectable()
export class PartitionRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

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

  /** True when the `bloom` index method is installed (see the bloom migration). */
  async bloomAvailable(): Promise<boolean> {
    const rows = (await this.db.query(`SELECT 1 FROM pg_extension WHERE extname = 'bloom'`)) as unknown[];
    return rows.length > 0;
  }

  /**
   * Creates the partition of one UTC day if it does not exist (safe to race). With `lookups`,
   * the new, empty partition gets its bloom index for the user and session filters at once,
   * before ingest writes to it.
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
        this.db.query(`CREATE INDEX IF NOT EXISTS ${name}_bloom ON ${name} ${BLOOM}`),
      );
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
   * Adds the bloom index for the user and session filters to a partition that ingest still
   * writes, without blocking writes (for partitions made before the index existed). Returns the
   * names of the indexes it built.
   */
  async indexLookups(name: string): Promise<string[]> {
    return this.ensureIndexes(name, { [`${name}_bloom`]: BLOOM });
  }

  /**
   * Adds the user and session filter B-trees to one partition, without blocking writes, then
   * drops its bloom index, which they replace. Returns the names of the indexes it built.
   */
  async indexFilters(name: string): Promise<string[]> {
    const built = await this.ensureIndexes(name, {
      [`${name}_user`]: filterTree('anonymous_user_id'),
      [`${name}_session`]: filterTree('session_id'),
    });
    await this.db.query(`DROP INDEX CONCURRENTLY IF EXISTS ${name}_bloom`);
    return built;
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
