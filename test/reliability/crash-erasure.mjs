// Crash consistency of erasure: kill -9 the server while it deletes a user with many events
// (100,000 by default, spread over the last three days), once during the deletion of events and,
// when the first run leaves time for it, again later; after each restart the deletion resumes.
// At the end it is `done`, it counted each deleted event once, none of the user's events is
// left, the other users' events are all there, and every rollup row of the app equals a fresh
// aggregation of the remaining events (final days included).
//
// Usage: npm run test:crash   (node test/reliability/crash-erasure.mjs [--events N])
import { parseArgs } from 'node:util';
import {
  assertBuilt,
  cli,
  freePort,
  http,
  Ledger,
  makeTenant,
  runScript,
  sleep,
  startDatabase,
  startServer,
} from './harness.mjs';

const { values } = parseArgs({
  options: { events: { type: 'string', default: '100000' }, kills: { type: 'string', default: '2' } },
});
const VICTIM_EVENTS = Number(values.events);
const KILLS = Number(values.kills);
const OTHER_USERS = 50;
const OTHER_EVENTS_PER_DAY = 2_000;
const DAYS = 3;
const DONE_DEADLINE_MS = 150_000;
const VICTIM = 'crash-victim-7';
const ledger = new Ledger();

/** Stores the events straight into the table (as ingest would), then marks the days for rollups. */
async function seed(pool, appId) {
  const perDay = Math.ceil(VICTIM_EVENTS / DAYS);
  for (let d = 0; d < DAYS; d++) {
    const dayStart = `date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '${d} days'`;
    // The victim's events, spread over the day; then other users'.
    await pool.query(
      `INSERT INTO events (app_id, ts, received_at, event_name, event_id, anonymous_user_id, session_id,
                           is_test_mode, float_value, payload_json)
       SELECT $1, ${dayStart} + ((i * 7) % 82800) * interval '1 second', now(),
              'Crash.' || (i % 4), 'v-${d}-' || i, CASE WHEN i <= $2 THEN $3 ELSE 'other-' || (i % ${OTHER_USERS}) END,
              's-' || (i % 97), false, (i % 13) * 0.5, '{}'::json
         FROM generate_series(1, $2 + ${OTHER_EVENTS_PER_DAY}) AS i`,
      [appId, Math.min(perDay, VICTIM_EVENTS - d * perDay), VICTIM],
    );
    await pool.query(`INSERT INTO rollup_dirty (app_id, day) VALUES ($1, (${dayStart})::date)`, [appId]);
  }
}

/** The rollup rows a fresh computation over the stored events gives, beside the stored ones. */
async function rollupMismatches(pool, appId) {
  const { rows } = await pool.query(
    `WITH fresh AS (
       SELECT (ts AT TIME ZONE 'UTC')::date AS day, is_test_mode,
              CASE WHEN GROUPING(event_name) = 1 THEN '' ELSE event_name END AS event_name,
              count(*)::bigint AS events, count(DISTINCT anonymous_user_id)::bigint AS users,
              count(float_value)::bigint AS fv_count, sum(float_value) AS fv_sum
         FROM events WHERE app_id = $1
        GROUP BY GROUPING SETS ((1, is_test_mode, event_name), (1, is_test_mode))),
     stored AS (
       SELECT day, is_test_mode, event_name, events::bigint, unique_users::bigint AS users,
              fv_count::bigint, fv_sum FROM rollups WHERE app_id = $1)
     SELECT count(*)::int AS n FROM fresh FULL JOIN stored USING (day, is_test_mode, event_name)
      WHERE fresh.events IS DISTINCT FROM stored.events OR fresh.users IS DISTINCT FROM stored.users
         OR fresh.fv_count IS DISTINCT FROM stored.fv_count
         OR abs(coalesce(fresh.fv_sum, 0) - coalesce(stored.fv_sum, 0)) > 1e-6`,
    [appId],
  );
  return rows[0].n;
}

async function deletionRow(pool, id) {
  const { rows } = await pool.query(
    `SELECT status, events_deleted::int AS deleted, steps_done, user_ids FROM deletions WHERE id = $1`,
    [id],
  );
  return rows[0];
}

async function main() {
  const started = Date.now();
  await assertBuilt();
  const db = await startDatabase('crash-erasure');
  try {
    const port = await freePort();
    let server = await startServer({ databaseUrl: db.url, port });
    const tenant = await makeTenant(db.url, 'crash-erasure');
    const key = await cli(db.url, ['keys', 'create-api', '--app', tenant.appId, '--scope', 'privacy:write']);
    await seed(db.pool, tenant.appId);
    await cli(db.url, ['rollups', 'compute', '--app', tenant.appId]);
    const others = (
      await db.pool.query(
        `SELECT count(*)::int AS n FROM events WHERE app_id = $1 AND anonymous_user_id <> $2`,
        [tenant.appId, VICTIM],
      )
    ).rows[0].n;

    const res = await http(server.base, '/api/v1/deletions', {
      method: 'POST',
      headers: { Authorization: `Bearer ${key.key}`, 'Content-Type': 'application/json' },
      body: { appId: tenant.appId, anonymousUserIds: [VICTIM] },
    });
    ledger.check('the deletion is accepted', res.status === 202, JSON.stringify(res.body));
    const id = res.body.id;

    // Kill while events are being deleted (some gone, not all), then at a later point.
    let kills = 0;
    const deadline = Date.now() + DONE_DEADLINE_MS;
    let row = await deletionRow(db.pool, id);
    while (row.status !== 'done' && row.status !== 'failed' && Date.now() < deadline) {
      const killNow = kills < KILLS && row.deleted > (kills === 0 ? 0 : VICTIM_EVENTS / 2);
      if (killNow) {
        const signal = await server.kill('SIGKILL');
        kills++;
        ledger.check(`kill ${kills}: server died of SIGKILL`, signal === 'SIGKILL', String(signal));
        process.stdout.write(
          `kill ${kills} at ${row.deleted} events deleted, steps done: ${row.steps_done.join(',') || 'none'}\n`,
        );
        server = await startServer({ databaseUrl: db.url, port });
      }
      // Poll interval of the loop that waits on the deletion row's progress.
      await sleep(20);
      row = await deletionRow(db.pool, id);
    }
    ledger.check('the server was killed during the deletion', kills >= 1, `${kills} kills`);
    ledger.check('the deletion ends done after the restarts', row.status === 'done', row.status);
    ledger.check(
      'each deleted event counted once',
      row.deleted === VICTIM_EVENTS,
      `${row.deleted} of ${VICTIM_EVENTS}`,
    );
    ledger.check('the deletion forgot the user id', row.user_ids === null, String(row.user_ids));
    const left = (
      await db.pool.query(
        `SELECT count(*)::int AS n FROM events WHERE app_id = $1 AND anonymous_user_id = $2`,
        [tenant.appId, VICTIM],
      )
    ).rows[0].n;
    ledger.check('no event of the user is left', left === 0, `${left} left`);
    const kept = (
      await db.pool.query(`SELECT count(*)::int AS n FROM events WHERE app_id = $1`, [tenant.appId])
    ).rows[0].n;
    ledger.check('every other event is kept', kept === others, `${kept} of ${others}`);
    const mismatches = await rollupMismatches(db.pool, tenant.appId);
    ledger.check(
      'every rollup row equals a fresh computation',
      mismatches === 0,
      `${mismatches} rows differ`,
    );
    await server.kill('SIGKILL');
    return ledger.finish(
      `crash-erasure: events=${VICTIM_EVENTS} kills=${kills} seconds=${((Date.now() - started) / 1000).toFixed(1)}`,
    );
  } finally {
    await db.destroy();
  }
}

runScript('erasure crash test', main);
