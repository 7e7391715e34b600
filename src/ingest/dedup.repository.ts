import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';

/** Upkeep of `event_dedup`, the table of event ids seen within the dedup window. */
@Injectable()
export class DedupRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /** Deletes dedup records older than `cutoff`; returns how many. */
  async expire(cutoff: Date): Promise<number> {
    const [, count] = (await this.db.query(`DELETE FROM event_dedup WHERE seen_at < $1`, [cutoff])) as [
      unknown,
      number,
    ];
    return count;
  }
}
