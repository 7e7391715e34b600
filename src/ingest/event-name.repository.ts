import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';

/** The event names already known for an app's day, which seed the in-memory name bound. */
@Injectable()
export class EventNameRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /**
   * The names the rollups hold for the app's UTC day: a primary-key range of at most the
   * name limit's rows, much cheaper than the day's events (which may be millions).
   */
  async namesOfDay(appId: string, day: string): Promise<string[]> {
    const rows = (await this.db.query(
      `SELECT DISTINCT event_name AS name FROM rollups
        WHERE app_id = $1 AND day = $2::date AND event_name <> ''`,
      [appId, day],
    )) as { name: string }[];
    return rows.map((r) => r.name);
  }
}
