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
 * The reads dataset: `total` events over the `days` UTC days that end today (today only up to
 * `now`), `bigCount` of them in `bigApp` and the rest shared by `smallApps`.
 *
 * Each day is filled as a plain table with one INSERT … SELECT FROM generate_series, frozen and
 * analysed, and then attached as the day's partition, which builds its indexes in one sorted pass: several
 * times faster than inserting through the partitioned table's indexes. Two days are filled at
 * once, one per core. Run it before the server starts, so the partition maintenance task does
 * not create the same days meanwhile.
 */
export async function generateEvents(url, { bigApp, smallApps, total, bigCount, days, now, onDay }) {
  const today = Math.floor(now / DAY_MS) * DAY_MS;
  const queue = Array.from({ length: days }, (_, i) => today - (days - 1 - i) * DAY_MS);
  const perDayBig = Math.round(bigCount / days);
  const perDay = Math.round(total / days);
  let done = 0;
  const worker = async () => {
    const client = await connect(url);
    try {
      await client.query(`SET synchronous_commit = off`);
      await client.query(`SET maintenance_work_mem = '256MB'`);
      for (let dayStart = queue.shift(); dayStart !== undefined; dayStart = queue.shift()) {
        const day = utcDayString(dayStart);
        const name = `events_p${day.replace(/-/g, '')}`;
        const span = Math.min(DAY_MS, now - dayStart);
        await client.query(`DROP TABLE IF EXISTS ${name}`);
        await client.query(`CREATE TABLE ${name} (LIKE events INCLUDING DEFAULTS)`);
        await fillDay(client, name, { bigApp, smallApps, perDayBig, perDay, dayStart, span, tag: day });
        await client.query(`VACUUM (FREEZE, ANALYZE) ${name}`);
        await client.query(
          `ALTER TABLE events ATTACH PARTITION ${name}
             FOR VALUES FROM ('${day} 00:00:00+00') TO ('${utcDayString(dayStart + DAY_MS)} 00:00:00+00')`,
        );
        onDay?.(++done, days);
      }
    } finally {
      await client.end();
    }
  };
  await Promise.all([worker(), worker()]);
  const client = await connect(url);
  try {
    // The partitions have their statistics already; only the parent's own are missing.
    await client.query('ANALYZE ONLY events');
  } finally {
    await client.end();
  }
}

async function fillDay(client, table, { bigApp, smallApps, perDayBig, perDay, dayStart, span, tag }) {
  await client.query(
    `INSERT INTO ${table} (app_id, ts, received_at, event_time, event_name, event_id, anonymous_user_id,
                           session_id, is_test_mode, platform, app_version, locale, float_value, payload)
     SELECT app_id, ts, ts + random() * interval '2 seconds', floor(extract(epoch FROM ts) * 1000)::bigint,
            ($5::text[])[1 + floor(power(random(), 1.7) * cardinality($5::text[]))::int],
            $7 || '.' || g,
            'u' || floor(random() * 40000)::int,
            's' || floor(random() * 300000)::int,
            random() < 0.02,
            (ARRAY['ios', 'android', 'web'])[1 + floor(random() * 3)::int],
            '3.' || floor(random() * 9)::int || '.' || floor(random() * 20)::int,
            (ARRAY['en-US', 'de-DE', 'fr-FR', 'ja-JP'])[1 + floor(random() * 4)::int],
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
                                      * ($8::float8 * interval '1 millisecond') AS ts,
                    g
               FROM generate_series(1, $6::int) AS g) AS s
      ORDER BY app_id, ts`,
    [bigApp, smallApps, perDayBig, new Date(dayStart).toISOString(), EVENT_NAMES, perDay, tag, span],
  );
}

/**
 * The database ceiling: the ingest write path without HTTP or validation. `write(client, appId,
 * events)` runs the service's own statement for one batch; this loop only feeds it from
 * `connections` clients for `seconds`.
 */
export async function dbCeiling({ url, appId, connections, seconds, batchSize, write, now = Date.now() }) {
  const templates = Array.from(
    { length: 16 },
    (_, i) => JSON.parse(batchTemplate(9000 + i, batchSize, now).render('t')).events,
  );
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
          const events = templates[(c + i) % templates.length].map((e, k) => ({
            ...e,
            eventId: `${runId}.${c}.${i}.${k}`,
          }));
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

/**
 * The cost of one durable commit on this machine: single-row INSERTs, each its own transaction.
 * Every ingest batch pays it once, so it bounds the write path together with the CPU.
 */
export async function commitProbe(url, count) {
  const client = await connect(url);
  try {
    await client.query('CREATE TABLE IF NOT EXISTS bench_commit_probe (at timestamptz NOT NULL)');
    const times = [];
    for (let i = 0; i < count; i++) {
      const t0 = process.hrtime.bigint();
      await client.query('INSERT INTO bench_commit_probe (at) VALUES (now())');
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    await client.query('DROP TABLE bench_commit_probe');
    return times;
  } finally {
    await client.end();
  }
}
