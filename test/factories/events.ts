import type { DataSource } from 'typeorm';
import { utcDateString } from '@app/common/time';
import { presentEventId } from '@app/common/event-ids';

/** One stored event. Times are epoch ms; `ts` (effective time) defaults to eventTime, then receivedAt. */
export interface SeedEvent {
  eventName: string;
  receivedAt: number;
  eventTime?: number | null;
  ts?: number;
  anonymousUserId?: string | null;
  sessionId?: string | null;
  eventId?: string | null;
  isTestMode?: boolean;
  platform?: string | null;
  appVersion?: string | null;
  buildNumber?: string | null;
  osVersion?: string | null;
  deviceModel?: string | null;
  locale?: string | null;
  timezone?: string | null;
  floatValue?: number | null;
  payload?: Record<string, string | number | boolean> | null;
}

/**
 * Stores events the way ingest does: one row per event in `events` (partition chosen by `ts`)
 * and one `rollup_dirty` mark per UTC day touched, in one transaction. Returns the ids in input order.
 */
export async function seedEvents(db: DataSource, appId: string, events: SeedEvent[]): Promise<string[]> {
  const rows = events.map((e, i) => ({
    i,
    ts: new Date(e.ts ?? e.eventTime ?? e.receivedAt).toISOString(),
    received_at: new Date(e.receivedAt).toISOString(),
    event_time: e.eventTime ?? null,
    event_name: e.eventName,
    event_id: e.eventId ?? null,
    anonymous_user_id: e.anonymousUserId ?? null,
    session_id: e.sessionId ?? null,
    is_test_mode: e.isTestMode ?? false,
    platform: e.platform ?? null,
    app_version: e.appVersion ?? null,
    build_number: e.buildNumber ?? null,
    os_version: e.osVersion ?? null,
    device_model: e.deviceModel ?? null,
    locale: e.locale ?? null,
    timezone: e.timezone ?? null,
    float_value: e.floatValue ?? null,
    payload: e.payload ?? null,
  }));
  const days = [...new Set(rows.map((r) => utcDateString(Date.parse(r.ts))))];
  return db.transaction(async (tx) => {
    const inserted = (await tx.query(
      `INSERT INTO events (app_id, ts, received_at, event_time, event_name, event_id, anonymous_user_id,
                           session_id, is_test_mode, platform, app_version, build_number, os_version,
                           device_model, locale, timezone, float_value, payload)
       SELECT $1, r.ts, r.received_at, r.event_time, r.event_name, r.event_id, r.anonymous_user_id,
              r.session_id, r.is_test_mode, r.platform, r.app_version, r.build_number, r.os_version,
              r.device_model, r.locale, r.timezone, r.float_value, r.payload
         FROM jsonb_to_recordset($2::jsonb) AS r(
                i int, ts timestamptz, received_at timestamptz, event_time bigint, event_name text,
                event_id text, anonymous_user_id text, session_id text, is_test_mode boolean,
                platform text, app_version text, build_number text, os_version text,
                device_model text, locale text, timezone text, float_value double precision,
                payload jsonb)
        ORDER BY r.i
       RETURNING id::text AS id`,
      [appId, JSON.stringify(rows)],
    )) as { id: string }[];
    await tx.query(`INSERT INTO rollup_dirty (app_id, day) SELECT $1, unnest($2::date[])`, [appId, days]);
    return inserted.map((r) => r.id);
  });
}

/** How many events of `appId` are stored. */
export async function storedEventCount(db: DataSource, appId: string): Promise<number> {
  const [{ n }] = (await db.query(`SELECT count(*)::int AS n FROM events WHERE app_id = $1`, [appId])) as {
    n: number;
  }[];
  return n;
}

/** The stored id (a decimal string) of an event, as answers show it for `appId`. */
export async function shownEventIds(db: DataSource, appId: string, ids: string[]): Promise<string[]> {
  const [{ value }] = (await db.query(`SELECT value FROM server_secrets WHERE name = 'cursor'`)) as {
    value: Buffer;
  }[];
  return ids.map((id) => presentEventId(value, appId, id));
}
