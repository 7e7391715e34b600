// The ingest write path as plain `pg` calls, for the database ceiling. It must stay the same
// statement sequence as the ingest repository: one transaction that claims the eventIds in
// event_dedup, inserts the fresh events with one INSERT … SELECT FROM unnest(...), and marks the
// days touched for the rollups.

const COLUMNS = [
  ['ts', 'timestamptz'],
  ['event_time', 'int8'],
  ['event_name', 'text'],
  ['event_id', 'text'],
  ['anonymous_user_id', 'text'],
  ['session_id', 'text'],
  ['is_test_mode', 'bool'],
  ['platform', 'text'],
  ['app_version', 'text'],
  ['build_number', 'text'],
  ['os_version', 'text'],
  ['device_model', 'text'],
  ['locale', 'text'],
  ['timezone', 'text'],
  ['float_value', 'float8'],
  ['payload', 'jsonb'],
];

const INSERT_EVENTS = `
  INSERT INTO events (app_id, received_at, ${COLUMNS.map(([c]) => c).join(', ')})
  SELECT $1::uuid, $2::timestamptz, ${COLUMNS.map(([c]) => `u.${c}`).join(', ')}
    FROM unnest(${COLUMNS.map(([, t], i) => `$${i + 3}::${t}[]`).join(', ')})
         AS u(${COLUMNS.map(([c]) => c).join(', ')})
   WHERE u.event_id IS NULL OR u.event_id = ANY($${COLUMNS.length + 3}::text[])`;

/** Writes one batch of already valid events; returns the rows inserted. */
export async function writeBatch(client, appId, events) {
  const receivedAt = new Date();
  const cols = COLUMNS.map(() => []);
  for (const e of events) {
    const ts = new Date(e.eventTime ?? receivedAt.getTime());
    const values = [
      ts.toISOString(),
      e.eventTime ?? null,
      e.eventName,
      e.eventId ?? null,
      e.anonymousUserId ?? null,
      e.sessionId ?? null,
      e.isTestMode ?? false,
      e.platform ?? null,
      e.appVersion ?? null,
      e.buildNumber ?? null,
      e.osVersion ?? null,
      e.deviceModel ?? null,
      e.locale ?? null,
      e.timezone ?? null,
      e.floatValue ?? null,
      e.payload ? JSON.stringify(e.payload) : null,
    ];
    for (let i = 0; i < values.length; i++) cols[i].push(values[i]);
  }
  const ids = events.map((e) => e.eventId).filter((id) => id !== undefined);
  await client.query('BEGIN');
  try {
    const claimed = await client.query(
      `INSERT INTO event_dedup (app_id, event_id, seen_at)
       SELECT $1::uuid, id, $2::timestamptz FROM unnest($3::text[]) AS id
       ON CONFLICT DO NOTHING
       RETURNING event_id`,
      [appId, receivedAt, ids],
    );
    const fresh = claimed.rows.map((r) => r.event_id);
    const inserted = await client.query(INSERT_EVENTS, [appId, receivedAt, ...cols, fresh]);
    const days = [...new Set(cols[0].map((ts) => ts.slice(0, 10)))];
    await client.query(
      `INSERT INTO rollup_dirty (app_id, day) SELECT $1::uuid, d FROM unnest($2::date[]) AS d`,
      [appId, days],
    );
    await client.query('COMMIT');
    return inserted.rowCount;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
