import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import type { AcceptedEvent } from './ingest.types';

const MS = `interval '1 millisecond'`;
const EPOCH = `'epoch'::timestamptz`;

// One statement does the whole write, so it is one transaction and one round trip:
//  - `fresh` claims each eventId in event_dedup. A row already there is a duplicate, unless it
//    is older than the dedup window (the hourly expiry has not reached it yet), in which case it
//    is refreshed and counts as new. Ids are claimed in sorted order so that two batches sharing
//    ids cannot deadlock; a concurrent identical batch waits on the unique index and then sees
//    the conflict, so exactly one copy is stored.
//  - `stored` inserts the events with no eventId or a freshly claimed one.
//  - `dirty` marks each UTC day that received events for the rollup task.
//  - The result lists the eventIds that were duplicates.
const INSERT_BATCH = `
WITH input AS (
  SELECT * FROM unnest(
    $3::text[], $4::bigint[], $5::bigint[], $6::text[], $7::text[], $8::text[], $9::boolean[],
    $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[],
    $17::float8[], $18::jsonb[]
  ) AS t(event_id, ts_ms, event_time, event_name, anonymous_user_id, session_id, is_test_mode,
         platform, app_version, build_number, os_version, device_model, locale, timezone,
         float_value, payload)
),
fresh AS (
  INSERT INTO event_dedup AS d (app_id, event_id, seen_at)
  SELECT $1::uuid, event_id, ${EPOCH} + $2::bigint * ${MS}
    FROM input WHERE event_id IS NOT NULL ORDER BY event_id
  ON CONFLICT (app_id, event_id) DO UPDATE SET seen_at = EXCLUDED.seen_at
    WHERE d.seen_at < ${EPOCH} + $19::bigint * ${MS}
  RETURNING d.event_id
),
stored AS (
  INSERT INTO events (app_id, ts, received_at, event_time, event_name, event_id, anonymous_user_id,
                      session_id, is_test_mode, platform, app_version, build_number, os_version,
                      device_model, locale, timezone, float_value, payload)
  SELECT $1::uuid, ${EPOCH} + i.ts_ms * ${MS}, ${EPOCH} + $2::bigint * ${MS}, i.event_time,
         i.event_name, i.event_id, i.anonymous_user_id, i.session_id, i.is_test_mode, i.platform,
         i.app_version, i.build_number, i.os_version, i.device_model, i.locale, i.timezone,
         i.float_value, i.payload
    FROM input i
   WHERE i.event_id IS NULL OR EXISTS (SELECT 1 FROM fresh f WHERE f.event_id = i.event_id)
  RETURNING ts
),
dirty AS (
  INSERT INTO rollup_dirty (app_id, day)
  SELECT DISTINCT $1::uuid, (ts AT TIME ZONE 'UTC')::date FROM stored
)
SELECT i.event_id AS "eventId" FROM input i
 WHERE i.event_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM fresh f WHERE f.event_id = i.event_id)`;

// node-pg would serialise JS arrays itself, with two regex passes per element; these build the
// same array literals in one pass, escaping only the elements that need it.
const NEEDS_ESCAPE = /["\\]/;
const ESCAPE = /["\\]/g;

function quote(s: string): string {
  return '"' + (NEEDS_ESCAPE.test(s) ? s.replace(ESCAPE, '\\$&') : s) + '"';
}

function literal<T>(
  events: AcceptedEvent[],
  pick: (e: AcceptedEvent) => T,
  format: (v: NonNullable<T>) => string,
): string {
  let out = '{';
  for (let i = 0; i < events.length; i++) {
    if (i > 0) out += ',';
    const v = pick(events[i]);
    out += v === null || v === undefined ? 'NULL' : format(v as NonNullable<T>);
  }
  return out + '}';
}

const text = (events: AcceptedEvent[], pick: (e: AcceptedEvent) => string | null) =>
  literal(events, pick, quote);
const num = (events: AcceptedEvent[], pick: (e: AcceptedEvent) => number | null) =>
  literal(events, pick, String);

// Prepared once per connection, so PostgreSQL plans this large statement once rather than on
// every batch. Bump the suffix whenever the statement's text changes.
const STATEMENT_NAME = 'tally_ingest_batch_v1';

interface PgClient {
  query(config: { name: string; text: string; values: unknown[] }): Promise<{ rows: { eventId: string }[] }>;
}

/** Writes accepted events. The only code that touches the events and dedup tables on ingest. */
@Injectable()
export class IngestRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /**
   * Stores `events` of one app atomically, skipping eventIds already seen since `dedupSince`.
   * The eventIds must be unique within `events`. Returns the eventIds that were duplicates.
   */
  async insertBatch(
    appId: string,
    receivedAt: number,
    dedupSince: number,
    events: AcceptedEvent[],
  ): Promise<string[]> {
    const values = [
      appId,
      receivedAt,
      text(events, (e) => e.eventId),
      num(events, (e) => e.ts),
      num(events, (e) => e.eventTime),
      text(events, (e) => e.eventName),
      text(events, (e) => e.anonymousUserId),
      text(events, (e) => e.sessionId),
      literal(
        events,
        (e) => e.isTestMode,
        (v) => (v ? 't' : 'f'),
      ),
      text(events, (e) => e.platform),
      text(events, (e) => e.appVersion),
      text(events, (e) => e.buildNumber),
      text(events, (e) => e.osVersion),
      text(events, (e) => e.deviceModel),
      text(events, (e) => e.locale),
      text(events, (e) => e.timezone),
      num(events, (e) => e.floatValue),
      text(events, (e) => (e.payload === null ? null : JSON.stringify(e.payload))),
      dedupSince,
    ];
    // The driver's client is used directly for its named (prepared) statements; TypeORM's
    // query() sends unnamed ones only.
    const runner = this.db.createQueryRunner();
    try {
      const client = (await runner.connect()) as PgClient;
      const result = await client.query({ name: STATEMENT_NAME, text: INSERT_BATCH, values });
      return result.rows.map((r) => r.eventId);
    } finally {
      await runner.release();
    }
  }
}
