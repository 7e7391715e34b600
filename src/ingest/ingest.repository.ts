import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import type { AcceptedEvent } from './ingest.types';

const MS = `interval '1 millisecond'`;
const EPOCH = `'epoch'::timestamptz`;

// One statement does the whole write of one or more batches, so it is one transaction and one
// round trip. Each input row carries its own app and receive time, because the writer puts the
// batches of several concurrent requests into one statement (see IngestWriter).
//  - `fresh` claims each eventId in event_dedup. A row already there is a duplicate, unless it
//    is older than the dedup window (the hourly expiry has not reached it yet), in which case it
//    is refreshed and counts as new. Ids are claimed in sorted order so that two statements
//    sharing ids cannot deadlock; a concurrent statement with the same id waits on the unique
//    index and then sees the conflict, so exactly one copy is stored.
//  - `stored` inserts the events with no eventId or a freshly claimed one.
//  - `dirty` marks each (app, UTC day) that received events, for the rollup task.
//  - The result lists the input positions (1-based) whose eventId was a duplicate.
const INSERT_ROWS = `
WITH input AS (
  SELECT * FROM unnest(
    $1::uuid[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[], $6::text[], $7::text[],
    $8::text[], $9::boolean[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[],
    $15::text[], $16::text[], $17::float8[], $18::jsonb[]
  ) WITH ORDINALITY AS t(app_id, received_ms, event_id, ts_ms, event_time, event_name,
         anonymous_user_id, session_id, is_test_mode, platform, app_version, build_number,
         os_version, device_model, locale, timezone, float_value, payload, n)
),
fresh AS (
  INSERT INTO event_dedup AS d (app_id, event_id, seen_at)
  SELECT app_id, event_id, ${EPOCH} + received_ms * ${MS}
    FROM input WHERE event_id IS NOT NULL ORDER BY app_id, event_id
  ON CONFLICT (app_id, event_id) DO UPDATE SET seen_at = EXCLUDED.seen_at
    WHERE d.seen_at < EXCLUDED.seen_at - $19::bigint * ${MS}
  RETURNING d.app_id, d.event_id
),
stored AS (
  INSERT INTO events (app_id, ts, received_at, event_time, event_name, event_id, anonymous_user_id,
                      session_id, is_test_mode, platform, app_version, build_number, os_version,
                      device_model, locale, timezone, float_value, payload)
  SELECT i.app_id, ${EPOCH} + i.ts_ms * ${MS}, ${EPOCH} + i.received_ms * ${MS}, i.event_time,
         i.event_name, i.event_id, i.anonymous_user_id, i.session_id, i.is_test_mode, i.platform,
         i.app_version, i.build_number, i.os_version, i.device_model, i.locale, i.timezone,
         i.float_value, i.payload
    FROM input i
   WHERE i.event_id IS NULL
      OR EXISTS (SELECT 1 FROM fresh f WHERE f.app_id = i.app_id AND f.event_id = i.event_id)
  RETURNING app_id, ts
),
dirty AS (
  INSERT INTO rollup_dirty (app_id, day)
  SELECT DISTINCT app_id, (ts AT TIME ZONE 'UTC')::date FROM stored
)
SELECT i.n::int AS n FROM input i
 WHERE i.event_id IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM fresh f WHERE f.app_id = i.app_id AND f.event_id = i.event_id)`;

// node-pg would serialise JS arrays itself, with two regex passes per element. These build the
// same PostgreSQL array literals with the engine's JSON.stringify: for strings it escapes `"` and
// `\` exactly as an array literal needs, and its `null` reads as NULL. It also writes control
// characters and lone surrogates as escapes (`\n`, `\u0001`) that an array literal would read
// differently, so a column whose JSON holds one is built element by element instead. Numbers are
// finite (the validator's rule), so JSON prints them in a form PostgreSQL reads back exactly.
const JSON_ONLY_ESCAPE = /\\[bfnrtu]/;
const NEEDS_ESCAPE = /["\\]/;
const ESCAPE = /["\\]/g;

function quote(s: string): string {
  return '"' + (NEEDS_ESCAPE.test(s) ? s.replace(ESCAPE, '\\$&') : s) + '"';
}

function arrayLiteral(values: (string | number | boolean | null)[]): string {
  const json = JSON.stringify(values);
  if (!JSON_ONLY_ESCAPE.test(json)) return '{' + json.slice(1, -1) + '}';
  return (
    '{' +
    values.map((v) => (v === null ? 'NULL' : typeof v === 'string' ? quote(v) : String(v))).join(',') +
    '}'
  );
}

const column = (rows: Row[], pick: (r: Row) => string | number | boolean | null) =>
  arrayLiteral(rows.map(pick));

// Prepared once per connection, so PostgreSQL plans this large statement once rather than on
// every batch. Bump the suffix whenever the statement's text changes.
const STATEMENT_NAME = 'tally_ingest_rows_v2';

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
}

interface Row {
  appId: string;
  receivedAt: number;
  event: AcceptedEvent;
}

/** Writes accepted events. The only code that touches the events and dedup tables on ingest. */
@Injectable()
export class IngestRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /**
   * Stores the events of `batches` atomically, in one statement, skipping eventIds of the same
   * app already seen within the last `dedupWindowMs` before each batch's receive time. An
   * eventId that two batches share is stored once, for the first. Returns, for each batch, the
   * positions in its `events` that were duplicates.
   */
  async insertBatches(batches: WriteBatch[], dedupWindowMs: number): Promise<number[][]> {
    const rows: Row[] = [];
    // Where each row came from, and the repeats found before the database saw them.
    const origin: [batch: number, position: number][] = [];
    const duplicates: number[][] = batches.map(() => []);
    const claimed = batches.length > 1 ? new Set<string>() : null;
    batches.forEach((batch, b) => {
      batch.events.forEach((event, position) => {
        if (claimed && event.eventId !== null) {
          // One statement cannot claim the same dedup record twice; the first copy wins.
          const key = `${batch.appId}/${event.eventId}`;
          if (claimed.has(key)) {
            duplicates[b].push(position);
            return;
          }
          claimed.add(key);
        }
        rows.push({ appId: batch.appId, receivedAt: batch.receivedAt, event });
        origin.push([b, position]);
      });
    });
    if (rows.length === 0) return duplicates;

    const values = [
      column(rows, (r) => r.appId),
      column(rows, (r) => r.receivedAt),
      column(rows, (r) => r.event.eventId),
      column(rows, (r) => r.event.ts),
      column(rows, (r) => r.event.eventTime),
      column(rows, (r) => r.event.eventName),
      column(rows, (r) => r.event.anonymousUserId),
      column(rows, (r) => r.event.sessionId),
      column(rows, (r) => r.event.isTestMode),
      column(rows, (r) => r.event.platform),
      column(rows, (r) => r.event.appVersion),
      column(rows, (r) => r.event.buildNumber),
      column(rows, (r) => r.event.osVersion),
      column(rows, (r) => r.event.deviceModel),
      column(rows, (r) => r.event.locale),
      column(rows, (r) => r.event.timezone),
      column(rows, (r) => r.event.floatValue),
      column(rows, (r) => (r.event.payload === null ? null : JSON.stringify(r.event.payload))),
      dedupWindowMs,
    ];
    // The driver's client is used directly for its named (prepared) statements; TypeORM's
    // query() sends unnamed ones only.
    const runner = this.db.createQueryRunner();
    try {
      const client = (await runner.connect()) as PgClient;
      const result = await client.query({ name: STATEMENT_NAME, text: INSERT_ROWS, values });
      for (const { n } of result.rows) {
        const [b, position] = origin[n - 1];
        duplicates[b].push(position);
      }
      return duplicates;
    } finally {
      await runner.release();
    }
  }
}
