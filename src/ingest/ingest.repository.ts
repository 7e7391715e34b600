import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { BinaryArrayWriter, ElementType, uuidBytes } from '@app/database/binary-arrays';
import type { AcceptedEvent } from './ingest.types';
import { dirtyMarkArrays } from './dirty-marks';

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
//    the app's time zone, named before the statement ($20-$22, see dirtyMarkArrays). It runs
//    last, after every row is written, and checks that the statement took at most $23 ms, what
//    was left of the oldest batch's commit budget when it was sent (tally_ingest_in_time raises
//    otherwise), so that no event commits later than that after its receivedAt: the export
//    horizon rests on it (docs/decisions.md).
//  - The result lists the input positions (1-based) whose eventId was a duplicate.
// The 18 arrays arrive in PostgreSQL's binary format (see BinaryArrayWriter); the dedup window
// is a text parameter.
const INSERT_ROWS = `
WITH input AS (
  SELECT * FROM unnest(
    $1::uuid[], $2::timestamptz[], $3::text[], $4::timestamptz[], $5::bigint[], $6::text[],
    $7::text[], $8::text[], $9::boolean[], $10::text[], $11::text[], $12::text[], $13::text[],
    $14::text[], $15::text[], $16::text[], $17::float8[], $18::json[]
  ) WITH ORDINALITY AS t(app_id, received_at, event_id, ts, event_time, event_name,
         anonymous_user_id, session_id, is_test_mode, platform, app_version, build_number,
         os_version, device_model, locale, timezone, float_value, payload, n)
),
fresh AS (
  INSERT INTO event_dedup AS d (app_id, event_id, seen_at)
  SELECT app_id, event_id, received_at
    FROM input WHERE event_id IS NOT NULL ORDER BY app_id, event_id
  ON CONFLICT (app_id, event_id) DO UPDATE SET seen_at = EXCLUDED.seen_at
    WHERE d.seen_at < EXCLUDED.seen_at - $19::bigint * interval '1 millisecond'
  RETURNING d.app_id, d.event_id
),
stored AS (
  INSERT INTO events (app_id, ts, received_at, event_time, event_name, event_id, anonymous_user_id,
                      session_id, is_test_mode, platform, app_version, build_number, os_version,
                      device_model, locale, timezone, float_value, payload_json)
  SELECT i.app_id, i.ts, i.received_at, i.event_time,
         i.event_name, i.event_id, i.anonymous_user_id, i.session_id, i.is_test_mode, i.platform,
         i.app_version, i.build_number, i.os_version, i.device_model, i.locale, i.timezone,
         i.float_value, i.payload
    FROM input i
   WHERE i.event_id IS NULL
      OR EXISTS (SELECT 1 FROM fresh f WHERE f.app_id = i.app_id AND f.event_id = i.event_id)
  RETURNING app_id, ts
),
dirty AS (
  INSERT INTO rollup_dirty (app_id, day, timezone)
  SELECT m.app_id, m.day::date, m.zone FROM unnest($20::uuid[], $21::text[], $22::text[]) AS m(app_id, day, zone)
   WHERE EXISTS (SELECT 1 FROM stored s WHERE s.app_id = m.app_id)
     AND tally_ingest_in_time($23::bigint)
)
SELECT i.n::int AS n FROM input i
 WHERE i.event_id IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM fresh f WHERE f.app_id = i.app_id AND f.event_id = i.event_id)`;

/**
 * The 18 arrays of one statement, column by column, in PostgreSQL's binary format: no escaping,
 * fixed-size uuids, numbers and timestamps, and one buffer for the whole statement. `batchOf[i]`
 * is the batch of `events[i]`, whose app and receive time the row carries.
 */
function statementArrays(batches: WriteBatch[], events: AcceptedEvent[], batchOf: number[]): Buffer[] {
  const n = events.length;
  // About what the JSON of an event takes, so that most statements never regrow the buffer.
  const w = new BinaryArrayWriter(n * 400);
  const apps = batches.map((b) => uuidBytes(b.appId));
  w.begin(ElementType.uuid, n);
  for (let i = 0; i < n; i++) w.uuid(apps[batchOf[i]]);
  w.end().begin(ElementType.timestamptz, n);
  for (let i = 0; i < n; i++) w.timestamptz(batches[batchOf[i]].receivedAt);
  w.end().begin(ElementType.text, n);
  for (let i = 0; i < n; i++) w.text(events[i].eventId);
  w.end().begin(ElementType.timestamptz, n);
  for (let i = 0; i < n; i++) w.timestamptz(events[i].ts);
  w.end().begin(ElementType.int8, n);
  for (let i = 0; i < n; i++) w.int8(events[i].eventTime);
  w.end().begin(ElementType.text, n);
  for (let i = 0; i < n; i++) w.text(events[i].eventName);
  w.end().begin(ElementType.text, n);
  for (let i = 0; i < n; i++) w.text(events[i].anonymousUserId);
  w.end().begin(ElementType.text, n);
  for (let i = 0; i < n; i++) w.text(events[i].sessionId);
  w.end().begin(ElementType.bool, n);
  for (let i = 0; i < n; i++) w.bool(events[i].isTestMode);
  w.end().begin(ElementType.text, n);
  for (let i = 0; i < n; i++) w.text(events[i].platform);
  w.end().begin(ElementType.text, n);
  for (let i = 0; i < n; i++) w.text(events[i].appVersion);
  w.end().begin(ElementType.text, n);
  for (let i = 0; i < n; i++) w.text(events[i].buildNumber);
  w.end().begin(ElementType.text, n);
  for (let i = 0; i < n; i++) w.text(events[i].osVersion);
  w.end().begin(ElementType.text, n);
  for (let i = 0; i < n; i++) w.text(events[i].deviceModel);
  w.end().begin(ElementType.text, n);
  for (let i = 0; i < n; i++) w.text(events[i].locale);
  w.end().begin(ElementType.text, n);
  for (let i = 0; i < n; i++) w.text(events[i].timezone);
  w.end().begin(ElementType.float8, n);
  for (let i = 0; i < n; i++) w.float8(events[i].floatValue);
  w.end().begin(ElementType.json, n);
  for (let i = 0; i < n; i++) {
    const payload = events[i].payload;
    w.json(payload === null ? null : JSON.stringify(payload));
  }
  return w.end().finish();
}

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
// every batch. Bump the suffix whenever the statement's text changes.
const STATEMENT_NAME = 'tally_ingest_rows_v5';

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
    const runner = this.db.createQueryRunner();
    try {
      const client = (await runner.connect()) as PgClient;
      return await this.insertWith(client, batches, dedupWindowMs, commitWithinMs);
    } finally {
      await runner.release();
    }
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
      ...statementArrays(batches, events, batchOf),
      dedupWindowMs,
      ...dirtyMarkArrays(batches),
      budgetMs,
    ];
    const result = await client.query({ name: STATEMENT_NAME, text: INSERT_ROWS, values });
    for (const { n } of result.rows) duplicates[batchOf[n - 1]].push(positionOf[n - 1]);
    return duplicates;
  }
}
