import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import type { AcceptedEvent } from './ingest.types';
import { dirtyMarkArrays } from './dirty-marks';
import { columnArrays, ColumnType, INGEST_COLUMNS } from './ingest-columns';
import { withDriverClient } from '@app/database/driver-client';

// One statement does the whole write of one or more batches, so it is one transaction and one
// round trip. Each input row carries its own app and receive time, because the writer puts the
// batches of several concurrent requests into one statement (see IngestWriter).
//  - `fresh` claims each eventId in event_dedup. A row already there is a duplicate, unless it
//    is older than the dedup window (the hourly expiry has not reached it yet), in which case it
//    is refreshed and counts as new. Ids are claimed in sorted order so that two statements
//    sharing ids cannot deadlock; a concurrent statement with the same id waits on the unique
//    index and then sees the conflict, so exactly one copy is stored.
//  - `stored` inserts the events with no eventId or a freshly claimed one.
//  - `dirty` marks each (app, local day) that received events, for the rollup task: the day in
//    the app's time zone, named before the statement (the three parameters after the dedup
//    window, see dirtyMarkArrays). It runs last, after every row is written, and checks that the
//    statement took at most the last parameter's ms, what was left of the oldest batch's commit
//    budget when it was sent (tally_ingest_in_time raises otherwise), so that no event commits
//    later than that after its receivedAt: the export horizon rests on it (docs/decisions.md).
//  - The result lists the input positions (1-based) whose eventId was a duplicate.
// The input columns come from INGEST_COLUMNS (the stored event's fields, common/events), whose arrays arrive first, in PostgreSQL's binary
// format (see columnArrays); then the dedup window (text), the dirty marks and the budget.

/** The SQL type of each element type, as the statement casts its arrays. */
const SQL_TYPE: Record<ColumnType, string> = {
  uuid: 'uuid',
  timestamptz: 'timestamptz',
  text: 'text',
  int8: 'bigint',
  bool: 'boolean',
  float8: 'float8',
  json: 'json',
};

/** The statement's parameter `k` after the columns' arrays (1: the dedup window). */
const after = (k: number) => `$${INGEST_COLUMNS.length + k}`;
const unnestArrays = INGEST_COLUMNS.map((c, k) => `$${k + 1}::${SQL_TYPE[c.type]}[]`).join(', ');
const inputNames = INGEST_COLUMNS.map((c) => c.name).join(', ');
const storedNames = inputNames;
const storedValues = INGEST_COLUMNS.map((c) => `i.${c.name}`).join(', ');

export const INSERT_ROWS = `
WITH input AS (
  SELECT * FROM unnest(${unnestArrays}) WITH ORDINALITY AS t(${inputNames}, n)
),
fresh AS (
  INSERT INTO event_dedup AS d (app_id, event_id, seen_at)
  SELECT app_id, event_id, received_at
    FROM input WHERE event_id IS NOT NULL ORDER BY app_id, event_id
  ON CONFLICT (app_id, event_id) DO UPDATE SET seen_at = EXCLUDED.seen_at
    WHERE d.seen_at < EXCLUDED.seen_at - ${after(1)}::bigint * interval '1 millisecond'
  RETURNING d.app_id, d.event_id
),
stored AS (
  INSERT INTO events (${storedNames})
  SELECT ${storedValues}
    FROM input i
   WHERE i.event_id IS NULL
      OR EXISTS (SELECT 1 FROM fresh f WHERE f.app_id = i.app_id AND f.event_id = i.event_id)
  RETURNING app_id, ts
),
dirty AS (
  INSERT INTO rollup_dirty (app_id, day, timezone)
  SELECT m.app_id, m.day::date, m.zone FROM unnest(${after(2)}::uuid[], ${after(3)}::text[], ${after(4)}::text[]) AS m(app_id, day, zone)
   WHERE EXISTS (SELECT 1 FROM stored s WHERE s.app_id = m.app_id)
     AND tally_ingest_in_time(${after(5)}::bigint)
)
SELECT i.n::int AS n FROM input i
 WHERE i.event_id IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM fresh f WHERE f.app_id = i.app_id AND f.event_id = i.event_id)`;

/**
 * Which events of `batches` go to the database, in order. An eventId that several batches of one
 * app share is sent once, for the first: one statement cannot claim the same dedup record twice.
 * The later copies are recorded in `duplicates` at once.
 */
function selectRows(batches: WriteBatch[], duplicates: number[][]) {
  const events: AcceptedEvent[] = [];
  const batchOf: number[] = [];
  const positionOf: number[] = [];
  // Only batches of the same app can share an eventId; an app alone in the group needs no set.
  const perApp = new Map<string, number>();
  for (const { appId } of batches) perApp.set(appId, (perApp.get(appId) ?? 0) + 1);
  const claimed = new Map<string, Set<string>>();
  for (let b = 0; b < batches.length; b++) {
    const { appId, events: batchEvents } = batches[b];
    let ids: Set<string> | undefined;
    if (perApp.get(appId)! > 1) {
      ids = claimed.get(appId);
      if (!ids) claimed.set(appId, (ids = new Set()));
    }
    for (let position = 0; position < batchEvents.length; position++) {
      const event = batchEvents[position];
      if (ids && event.eventId !== null) {
        if (ids.has(event.eventId)) {
          duplicates[b].push(position);
          continue;
        }
        ids.add(event.eventId);
      }
      events.push(event);
      batchOf.push(b);
      positionOf.push(position);
    }
  }
  return { events, batchOf, positionOf };
}

// Prepared once per connection, so PostgreSQL plans this large statement once rather than on
// every batch. Bump the suffix whenever the statement's text changes, INGEST_COLUMNS included.
const STATEMENT_NAME = 'tally_ingest_rows_v7';

interface PgClient {
  query(config: { name: string; text: string; values: unknown[] }): Promise<{ rows: { n: number }[] }>;
}

/** The accepted events of one request, for one app. */
export interface WriteBatch {
  appId: string;
  /** Epoch ms: the events' received_at and the dedup record's seen_at. */
  receivedAt: number;
  /** Unique eventIds within the batch (the service drops repeats first). */
  events: AcceptedEvent[];
  /** The app's IANA time zone, from the key cache: it names the local day of the dirty marks (default UTC). */
  timezone?: string;
}

/** Writes accepted events. The only code that touches the events and dedup tables on ingest. */
@Injectable()
export class IngestRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /**
   * Stores the events of `batches` atomically, in one statement, skipping eventIds of the same
   * app already seen within the last `dedupWindowMs` before each batch's receive time. An
   * eventId that two batches share is stored once, for the first. Returns, for each batch, the
   * positions in its `events` that were duplicates. Refuses (SQLSTATE 53T01, nothing stored)
   * when the statement ends more than `commitWithinMs` after the oldest batch's receive time
   * (the wait before it on this clock, the statement itself on the database's).
   */
  async insertBatches(
    batches: WriteBatch[],
    dedupWindowMs: number,
    commitWithinMs: number,
  ): Promise<number[][]> {
    // The driver's client is used directly for its named (prepared) statements; TypeORM's
    // query() sends unnamed ones only.
    return withDriverClient(this.db, (client) =>
      this.insertWith(client as PgClient, batches, dedupWindowMs, commitWithinMs),
    );
  }

  /**
   * As `insertBatches`, inside the caller's transaction (the quarantine replay). The commit comes
   * after the caller's remaining statements, which the horizon's other half covers.
   */
  async insertBatchesIn(
    manager: EntityManager,
    batches: WriteBatch[],
    dedupWindowMs: number,
    commitWithinMs: number,
  ): Promise<number[][]> {
    const client = (await manager.queryRunner!.connect()) as PgClient;
    return this.insertWith(client, batches, dedupWindowMs, commitWithinMs);
  }

  private async insertWith(
    client: PgClient,
    batches: WriteBatch[],
    dedupWindowMs: number,
    commitWithinMs: number,
  ): Promise<number[][]> {
    const duplicates: number[][] = batches.map(() => []);
    const { events, batchOf, positionOf } = selectRows(batches, duplicates);
    if (events.length === 0) return duplicates;

    // What is left of the commit budget of the oldest batch; the statement must end within it.
    const oldest = Math.min(...batches.map((b) => b.receivedAt));
    const budgetMs = commitWithinMs - (Date.now() - oldest);
    const values: unknown[] = [
      ...columnArrays({ batches, events, batchOf }),
      dedupWindowMs,
      ...dirtyMarkArrays(batches),
      budgetMs,
    ];
    const result = await client.query({ name: STATEMENT_NAME, text: INSERT_ROWS, values });
    for (const { n } of result.rows) duplicates[batchOf[n - 1]].push(positionOf[n - 1]);
    return duplicates;
  }
}
