// Direct database work of the benchmark: databases, row counts, the reads dataset and the
// database ceiling. The server and the CLI never see this code; it only prepares and checks.
import pg from 'pg';
import { EVENT_NAMES, batchTemplate } from './events.mjs';

const DAY_MS = 86_400_000;

export function withDatabase(url, database) {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

export async function connect(url) {
  const client = new pg.Client({ connectionString: url, application_name: 'tally-bench' });
  await client.connect();
  return client;
}

/** Drops and recreates `database` in the cluster behind `adminUrl`. */
export async function recreateDatabase(adminUrl, database) {
  const admin = await connect(withDatabase(adminUrl, 'postgres'));
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${database}`);
  } finally {
    await admin.end();
  }
}

export async function databaseExists(adminUrl, database) {
  const admin = await connect(withDatabase(adminUrl, 'postgres'));
  try {
    const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    return rowCount > 0;
  } finally {
    await admin.end();
  }
}

export async function countEvents(client, appId) {
  const { rows } = await client.query('SELECT count(*)::bigint AS n FROM events WHERE app_id = $1', [appId]);
  return Number(rows[0].n);
}

export async function countDedup(client, appId) {
  const { rows } = await client.query('SELECT count(*)::bigint AS n FROM event_dedup WHERE app_id = $1', [
    appId,
  ]);
  return Number(rows[0].n);
}

function utcDayString(t) {
  return new Date(Math.floor(t / DAY_MS) * DAY_MS).toISOString().slice(0, 10);
}

/** Creates the daily partitions covering [fromMs, toMs], named as the maintenance task names them. */
export async function ensurePartitions(client, fromMs, toMs) {
  for (let t = Math.floor(fromMs / DAY_MS) * DAY_MS; t <= toMs; t += DAY_MS) {
    const start = utcDayString(t);
    const end = utcDayString(t + DAY_MS);
    await client.query(
      `CREATE TABLE IF NOT EXISTS events_p${start.replace(/-/g, '')} PARTITION OF events
         FOR VALUES FROM ('${start} 00:00:00+00') TO ('${end} 00:00:00+00')`,
    );
  }
}

/** Filler apps for the reads dataset: plain rows, as the CLI would write them. */
export async function insertApps(client, count, prefix) {
  const { rows } = await client.query(
    `INSERT INTO apps (id, name, pii_secret)
     SELECT gen_random_uuid(), $1 || '-' || g, decode(md5(random()::text) || md5(random()::text), 'hex')
       FROM generate_series(1, $2) AS g
     RETURNING id`,
    [prefix, count],
  );
  return rows.map((r) => r.id);
}

/**
 * The reads dataset: `total` events spread evenly over `days` days that end now, `bigCount` of
 * them in `bigApp` and the rest shared by `smallApps`. One INSERT … SELECT FROM generate_series
 * per day, sorted by the index key so that the B-trees fill from the right.
 */
export async function generateEvents(client, { bigApp, smallApps, total, bigCount, days, now, onDay }) {
  const start = now - days * DAY_MS;
  await ensurePartitions(client, start, now + DAY_MS);
  await client.query(`SET synchronous_commit = off`);
  await client.query(`SET maintenance_work_mem = '256MB'`);
  await client.query(`SET work_mem = '64MB'`);
  const perDayBig = Math.round(bigCount / days);
  const perDay = Math.round(total / days);
  for (let d = 0; d < days; d++) {
    await client.query(
      `INSERT INTO events (app_id, ts, received_at, event_time, event_name, event_id, anonymous_user_id,
                           session_id, is_test_mode, platform, app_version, build_number, os_version,
                           device_model, locale, timezone, float_value, payload)
       SELECT app_id, ts, ts + random() * interval '2 seconds', floor(extract(epoch FROM ts) * 1000)::bigint,
              ($5::text[])[1 + floor(power(random(), 1.7) * cardinality($5::text[]))::int],
              'g${d}.' || g,
              'u' || floor(random() * 40000)::int,
              's' || floor(random() * 300000)::int,
              random() < 0.02,
              (ARRAY['ios', 'android', 'web'])[1 + floor(random() * 3)::int],
              '3.' || floor(random() * 9)::int || '.' || floor(random() * 20)::int,
              NULL, NULL, NULL,
              (ARRAY['en-US', 'de-DE', 'fr-FR', 'ja-JP'])[1 + floor(random() * 4)::int],
              NULL,
              CASE WHEN random() < 0.2 THEN round((random() * 100)::numeric, 2)::float8 END,
              jsonb_build_object('screen', (ARRAY['home', 'cart', 'search', 'feed'])[1 + floor(random() * 4)::int],
                                 'step', floor(random() * 12)::int,
                                 'price', round((random() * 200)::numeric, 2),
                                 'plan', (ARRAY['free', 'pro', 'team'])[1 + floor(random() * 3)::int],
                                 'trial', random() < 0.2)
         FROM (SELECT CASE WHEN g <= $3 THEN $1::uuid
                           ELSE ($2::uuid[])[1 + (g - $3 - 1) % cardinality($2::uuid[])] END AS app_id,
                      $4::timestamptz + (CASE WHEN g <= $3 THEN (g - 1)::float8 / $3
                                              ELSE (g - $3 - 1)::float8 / greatest($6 - $3, 1) END)
                                        * interval '1 day' AS ts,
                      g
                 FROM generate_series(1, $6::int) AS g) AS s
        ORDER BY app_id, ts`,
      [bigApp, smallApps, perDayBig, new Date(start + d * DAY_MS).toISOString(), EVENT_NAMES, perDay],
    );
    onDay?.(d + 1, days);
  }
  await client.query(`RESET synchronous_commit`);
}

/**
 * The database ceiling: the ingest write path without HTTP or validation. `write(client, batch)`
 * is the service's own statement sequence for one batch; this loop only feeds it from
 * `connections` clients for `seconds`.
 */
export async function dbCeiling({ url, appId, connections, seconds, batchSize, write, now = Date.now() }) {
  const templates = Array.from({ length: 16 }, (_, i) => batchTemplate(9000 + i, batchSize, now));
  const clients = await Promise.all(Array.from({ length: connections }, () => connect(url)));
  let rows = 0;
  let batches = 0;
  const latencies = [];
  const runId = `c${Date.now().toString(36)}`;
  const deadline = Date.now() + seconds * 1000;
  const started = process.hrtime.bigint();
  try {
    await Promise.all(
      clients.map(async (client, c) => {
        for (let i = 0; Date.now() < deadline; i++) {
          const events = JSON.parse(
            templates[(c + i) % templates.length].render(`${runId}.${c}.${i}`),
          ).events;
          const t0 = process.hrtime.bigint();
          const written = await write(client, appId, events);
          rows += written;
          latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
          batches++;
        }
      }),
    );
  } finally {
    await Promise.all(clients.map((c) => c.end()));
  }
  const elapsed = Number(process.hrtime.bigint() - started) / 1e9;
  return { connections, batchSize, batches, rows, seconds: elapsed, rowsPerSec: rows / elapsed, latencies };
}
