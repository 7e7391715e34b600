import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';

/** Upkeep of `event_dedup`, the table of event ids seen within the dedup window. */
@Injectable()
export class DedupRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /**
   * The eventIds among `ids` that the app has already stored within the dedup window before
   * `receivedAt`: what ingest would count as duplicates (the dry run reads, never claims).
   */
  async seen(appId: string, ids: string[], receivedAt: number, windowMs: number): Promise<Set<string>> {
    if (!ids.length) return new Set();
    const rows = (await this.db.query(
      `SELECT event_id FROM event_dedup
        WHERE app_id = $1 AND event_id = ANY($2::text[]) AND seen_at >= $3`,
      [appId, ids, new Date(receivedAt - windowMs)],
    )) as { event_id: string }[];
    return new Set(rows.map((r) => r.event_id));
  }

  /** Deletes dedup records older than `cutoff`; returns how many. */
  async expire(cutoff: Date): Promise<number> {
    const [, count] = (await this.db.query(`DELETE FROM event_dedup WHERE seen_at < $1`, [cutoff])) as [
      unknown,
      number,
    ];
    return count;
  }
}
