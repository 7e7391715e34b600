import type { DataSource } from 'typeorm';

/**
 * Stores `count` events of `appId` with a payload of about 29 KB each, received 1 ms
 * apart from `fromMs`, in one statement (as ingest stores a payload: its compact JSON text). The
 * payloads differ per event and compress in the table, as real ones do.
 */
export async function seedLargeEvents(
  db: DataSource,
  appId: string,
  fromMs: number,
  count: number,
): Promise<void> {
  await db.query(
    `INSERT INTO events (app_id, ts, received_at, event_name, event_id, is_test_mode, payload_json)
     SELECT $1, r, r, 'Large.payload', 'large-' || g, false,
            format('{"n":%s,"blob":"%s"}', g, repeat(md5(g::text), 900))::json
       FROM (SELECT g, $2::timestamptz + g * interval '1 ms' AS r FROM generate_series(1, $3::int) g) s`,
    [appId, new Date(fromMs), count],
  );
}
