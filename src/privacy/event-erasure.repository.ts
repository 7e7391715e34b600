import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { EVENT_COLUMN as c } from '@app/common/events/event-fields';

const PARTITION_NAME = /^events_p\d{8}$/;

/**
 * Deletes users' events, one partition and one batch at a time. Each batch is one statement that
 * deletes the rows and adds their count and days to the deletion's row, so a crash between two
 * batches loses nothing and counts nothing twice. Rows are named by their key (app, receive time,
 * id: the index every partition has), never by their physical place, and the statement names the
 * app in every table it touches, so that on Citus it runs whole on the worker that holds the app.
 */
@Injectable()
export class EventErasureRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /**
   * Deletes at most `limit` events of `userIds` in `appId` from one partition; returns how many.
   * The receive-time condition lets the planner cost the BRIN lookup index of the days ingest
   * writes as the narrow read it is (src/storage/partition.repository.ts); ended days answer
   * from their (app, user, …) B-tree.
   */
  async deleteBatch(
    partition: string,
    deletionId: string,
    appId: string,
    userIds: string[],
    limit: number,
  ): Promise<number> {
    if (!PARTITION_NAME.test(partition)) throw new Error(`not an events partition: ${partition}`);
    const [row] = (await this.db.query(
      `WITH gone AS (
         DELETE FROM ${partition}
          WHERE ${c.appId} = $2
            AND (${c.receivedAt}, ${c.id}) IN (
                  SELECT ${c.receivedAt}, ${c.id} FROM ${partition}
                   WHERE ${c.appId} = $2 AND ${c.anonymousUserId} = ANY ($3::text[])
                     AND ${c.receivedAt} > '-infinity'::timestamptz
                   LIMIT $4)
         RETURNING ${c.timestamp}),
       batch AS (
         SELECT count(*)::bigint AS n,
                coalesce(array_agg(DISTINCT (${c.timestamp} AT TIME ZONE 'UTC')::date), '{}') AS days
           FROM gone)
       UPDATE deletions d
          SET events_deleted = d.events_deleted + batch.n,
              days = ARRAY(SELECT DISTINCT x FROM unnest(d.days || batch.days) AS x ORDER BY x)
         FROM batch
        WHERE d.app_id = $2 AND d.id = $1
       RETURNING batch.n::int AS n`,
      [deletionId, appId, userIds, limit],
    )) as { n: number }[];
    return row?.n ?? 0;
  }

  /**
   * Deletes at most `limit` events of the whole app from one partition (an app's deletion);
   * returns how many, and counts them in the deletion's row in the same statement.
   */
  async deleteAppBatch(partition: string, deletionId: string, appId: string, limit: number): Promise<number> {
    if (!PARTITION_NAME.test(partition)) throw new Error(`not an events partition: ${partition}`);
    const [row] = (await this.db.query(
      `WITH gone AS (
         DELETE FROM ${partition}
          WHERE ${c.appId} = $2
            AND (${c.receivedAt}, ${c.id}) IN (
                  SELECT ${c.receivedAt}, ${c.id} FROM ${partition} WHERE ${c.appId} = $2 LIMIT $3)
         RETURNING 1)
       UPDATE deletions d SET events_deleted = d.events_deleted + (SELECT count(*) FROM gone)
        WHERE d.app_id = $2 AND d.id = $1
       RETURNING (SELECT count(*) FROM gone)::int AS n`,
      [deletionId, appId, limit],
    )) as { n: number }[];
    return row?.n ?? 0;
  }

  /** Whether any event of `appId` is left in one partition. */
  async anyOfAppLeft(partition: string, appId: string): Promise<boolean> {
    if (!PARTITION_NAME.test(partition)) throw new Error(`not an events partition: ${partition}`);
    const [row] = (await this.db.query(
      `SELECT EXISTS (SELECT 1 FROM ${partition} WHERE ${c.appId} = $1) AS left`,
      [appId],
    )) as { left: boolean }[];
    return row.left;
  }

  /** Whether any event of `userIds` in `appId` is left in one partition. */
  async anyLeft(partition: string, appId: string, userIds: string[]): Promise<boolean> {
    if (!PARTITION_NAME.test(partition)) throw new Error(`not an events partition: ${partition}`);
    const [row] = (await this.db.query(
      `SELECT EXISTS (SELECT 1 FROM ${partition}
                       WHERE ${c.appId} = $1 AND ${c.anonymousUserId} = ANY ($2::text[])
                         AND ${c.receivedAt} > '-infinity'::timestamptz) AS left`,
      [appId, userIds],
    )) as { left: boolean }[];
    return row.left;
  }
}
