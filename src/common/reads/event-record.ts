import { presentEventId } from '@app/common/event-ids';
import type { EventRecordDto } from './event-record.dto';

/**
 * One stored event as the read queries return it (bigints still as strings). Both
 * `GET /api/v1/events` and the export select it with EVENT_ROW_COLUMNS and present it with
 * `toEventRecord`, so the two always give the same record.
 */
export interface EventRow {
  id: string;
  app_id: string;
  event_name: string;
  anonymous_user_id: string | null;
  session_id: string | null;
  event_time: string | null;
  ts_ms: string;
  received_us: string;
  event_id: string | null;
  is_test_mode: boolean;
  platform: string | null;
  app_version: string | null;
  build_number: string | null;
  os_version: string | null;
  device_model: string | null;
  locale: string | null;
  timezone: string | null;
  float_value: number | null;
  payload: Record<string, string | number | boolean> | null;
}

/** The select list (over `events`) that yields an EventRow. */
export const EVENT_ROW_COLUMNS = `id::text AS id, app_id, event_name, anonymous_user_id, session_id,
       event_time::text AS event_time,
       floor(extract(epoch FROM ts) * 1000)::bigint::text AS ts_ms,
       (extract(epoch FROM received_at) * 1000000)::bigint::text AS received_us,
       event_id, is_test_mode, platform, app_version, build_number, os_version,
       device_model, locale, timezone, float_value,
       coalesce(payload_json, payload::json) AS payload`;

/**
 * The record every read answers with, for one stored row. `secret` is the cursor key, from which
 * each app's opaque ids are derived (src/common/event-ids.ts).
 */
export function toEventRecord(secret: Buffer, row: EventRow): EventRecordDto {
  return {
    id: presentEventId(secret, row.app_id, row.id),
    appId: row.app_id,
    eventName: row.event_name,
    anonymousUserId: row.anonymous_user_id,
    sessionId: row.session_id,
    eventTime: row.event_time === null ? null : Number(row.event_time),
    timestamp: Number(row.ts_ms),
    receivedAt: Number(BigInt(row.received_us) / 1000n),
    eventId: row.event_id,
    isTestMode: row.is_test_mode,
    platform: row.platform,
    appVersion: row.app_version,
    buildNumber: row.build_number,
    osVersion: row.os_version,
    deviceModel: row.device_model,
    locale: row.locale,
    timezone: row.timezone,
    floatValue: row.float_value,
    payload: row.payload,
  };
}
