import { DAY_MS, utcDateString } from '@app/common/time';
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';

const PARTITION_NAME = /^events_p(\d{4})(\d{2})(\d{2})$/;

function dayName(day: Date): string {
  return `events_p${utcDateString(day.getTime()).replace(/-/g, '')}`;
}

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

  /** Creates the partition of one UTC day if it does not exist (safe to race). */
  async create(day: Date): Promise<void> {
    const start = utcDateString(day.getTime());
    const end = utcDateString(day.getTime() + DAY_MS);
    try {
      await this.db.query(
        `CREATE TABLE IF NOT EXISTS ${dayName(day)} PARTITION OF events
           FOR VALUES FROM ('${start} 00:00:00+00') TO ('${end} 00:00:00+00')`,
      );
    } catch (err) {
      // Two instances creating the same partition at once: IF NOT EXISTS does not cover the
      // race, and the loser sees duplicate_table (42P07) or a unique violation (23505).
      const code = (err as { driverError?: { code?: string } }).driverError?.code;
      if (code !== '42P07' && code !== '23505') throw err;
    }
  }

  /**
   * Adds the user and session filter indexes to one partition, without blocking writes.
   * Returns the names of the indexes it built. An index left invalid by an interrupted build
   * is dropped and built again.
   */
  async indexFilters(name: string): Promise<string[]> {
    if (!PARTITION_NAME.test(name)) throw new Error(`not an events partition: ${name}`);
    const wanted: Record<string, string> = {
      [`${name}_user`]: 'anonymous_user_id',
      [`${name}_session`]: 'session_id',
    };
    const rows = (await this.db.query(
      `SELECT c.relname AS name, i.indisvalid AS valid
         FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE c.relname = ANY($1)`,
      [Object.keys(wanted)],
    )) as { name: string; valid: boolean }[];
    const state = new Map(rows.map((r) => [r.name, r.valid]));
    const built: string[] = [];
    for (const [index, column] of Object.entries(wanted)) {
      if (state.get(index) === true) continue;
      if (state.get(index) === false) await this.db.query(`DROP INDEX CONCURRENTLY IF EXISTS ${index}`);
      await this.db.query(
        `CREATE INDEX CONCURRENTLY IF NOT EXISTS ${index}
           ON ${name} (app_id, ${column}, received_at DESC, id DESC) WHERE ${column} IS NOT NULL`,
      );
      built.push(index);
    }
    return built;
  }

  async drop(name: string): Promise<void> {
    if (!PARTITION_NAME.test(name)) throw new Error(`not an events partition: ${name}`);
    await this.db.query(`DROP TABLE IF EXISTS ${name}`);
  }
}
