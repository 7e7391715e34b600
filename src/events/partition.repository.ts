import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';

const PARTITION_NAME = /^events_p(\d{4})(\d{2})(\d{2})$/;

function dayName(day: Date): string {
  return `events_p${day.toISOString().slice(0, 10).replace(/-/g, '')}`;
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
    const start = day.toISOString().slice(0, 10);
    const end = new Date(day.getTime() + 86_400_000).toISOString().slice(0, 10);
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

  async drop(name: string): Promise<void> {
    if (!PARTITION_NAME.test(name)) throw new Error(`not an events partition: ${name}`);
    await this.db.query(`DROP TABLE IF EXISTS ${name}`);
  }

  /** Deletes dedup records older than `cutoff`; returns how many. */
  async expireDedup(cutoff: Date): Promise<number> {
    const [, count] = (await this.db.query(`DELETE FROM event_dedup WHERE seen_at < $1`, [cutoff])) as [
      unknown,
      number,
    ];
    return count;
  }
}
