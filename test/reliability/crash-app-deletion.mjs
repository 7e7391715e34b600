// Crash consistency of an app's deletion: kill -9 the server while it erases an app with many
// events (60,000 by default, over the last three days) and its other rows, then restart it; the
// deletion resumes. At the end it is `done`, it counted each deleted event once, no table holds a
// row of the app (but the audit log and the deletion's own record), and another app's rows are
// all there, as they were.
//
// Usage: npm run test:crash   (node test/reliability/crash-app-deletion.mjs [--events N])
import { parseArgs } from 'node:util';
import {
  assertBuilt,
  cli,
  freePort,
  Ledger,
  makeTenant,
  runScript,
  sleep,
  startDatabase,
  startServer,
} from './harness.mjs';

const { values } = parseArgs({ options: { events: { type: 'string', default: '60000' } } });
const EVENTS = Number(values.events);
const DAYS = 3;
const DONE_DEADLINE_MS = 150_000;
const ledger = new Ledger();

/** Stores `n` events of the app straight into the table, marks their days, and quarantines a few. */
async function seed(pool, appId, n) {
  for (let d = 0; d < DAYS; d++) {
    const dayStart = `date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '${d} days'`;
    await pool.query(
      `INSERT INTO events (app_id, ts, received_at, event_name, event_id, anonymous_user_id, session_id,
                           is_test_mode, float_value, payload_json)
       SELECT $1, ${dayStart} + ((i * 7) % 82800) * interval '1 second', now(), 'Crash.' || (i % 4),
              'a-${d}-' || i, 'u-' || (i % 300), 's-' || (i % 97), false, (i % 13) * 0.5, '{}'::json
         FROM generate_series(1, $2) AS i`,
      [appId, Math.ceil(n / DAYS)],
    );
    await pool.query(`INSERT INTO rollup_dirty (app_id, day) VALUES ($1, (${dayStart})::date)`, [appId]);
  }
  await pool.query(
    `INSERT INTO quarantine (app_id, received_at, ts, event_name, is_test_mode, code, violations)
     SELECT $1, now(), now(), 'Unplanned.' || i, false, 'unplanned_event', '[]'::jsonb FROM generate_series(1, 20) i`,
    [appId],
  );
}

/** Rows of `appId` in every table with an `app_id` column (partitions through their parent). */
async function rowsOf(pool, appId) {
  const { rows: tables } = await pool.query(
    `SELECT c.relname AS name FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
      WHERE a.attname = 'app_id' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
        AND c.relnamespace = 'public'::regnamespace ORDER BY 1`,
  );
  const out = {};
  for (const { name } of tables) {
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM ${name} WHERE app_id = $1`, [appId]);
    if (rows[0].n > 0) out[name] = rows[0].n;
  }
  const keys = await pool.query(`SELECT count(*)::int AS n FROM keys WHERE $1::uuid = ANY (app_ids)`, [
    appId,
  ]);
  if (keys.rows[0].n > 0) out.keys = keys.rows[0].n;
  const apps = await pool.query(`SELECT count(*)::int AS n FROM apps WHERE id = $1`, [appId]);
  if (apps.rows[0].n > 0) out.apps = apps.rows[0].n;
  return out;
}

async function deletionRow(pool, id) {
  const { rows } = await pool.query(
    `SELECT status, events_deleted::int AS deleted, steps_done FROM deletions WHERE id = $1`,
    [id],
  );
  return rows[0];
}

/** Kills the server while the app's events are being deleted, restarts it; the last row seen and the kills. */
async function killDuring(db, id, server, port) {
  let kills = 0;
  const deadline = Date.now() + DONE_DEADLINE_MS;
  let row = await deletionRow(db.pool, id);
  while (row.status !== 'done' && row.status !== 'failed' && Date.now() < deadline) {
    if (kills === 0 && row.deleted > 0) {
      const signal = await server.kill('SIGKILL');
      kills++;
      ledger.check('the server died of SIGKILL', signal === 'SIGKILL', String(signal));
      process.stdout.write(
        `kill at ${row.deleted} events deleted, steps done: ${row.steps_done.join(',') || 'none'}\n`,
      );
      server = await startServer({ databaseUrl: db.url, port });
    }
    // Poll interval of the loop that waits on the deletion row's progress.
    await sleep(20);
    row = await deletionRow(db.pool, id);
  }
  return { row, kills, server };
}

async function main() {
  const started = Date.now();
  await assertBuilt();
  const db = await startDatabase('crash-app-deletion');
  try {
    const port = await freePort();
    const first = await startServer({ databaseUrl: db.url, port });
    const doomed = await makeTenant(db.url, 'crash-doomed');
    const kept = await makeTenant(db.url, 'crash-kept');
    await seed(db.pool, doomed.appId, EVENTS);
    await seed(db.pool, kept.appId, 3_000);
    await cli(db.url, ['rollups', 'compute']);
    const keptBefore = await rowsOf(db.pool, kept.appId);

    const deletion = await cli(db.url, ['apps', 'delete', doomed.appId, '--yes']);
    ledger.check('the deletion is accepted', deletion.status === 'pending', JSON.stringify(deletion));
    const { row, kills, server } = await killDuring(db, deletion.id, first, port);
    ledger.check('the server was killed during the deletion', kills === 1, `${kills} kills`);
    ledger.check('the deletion ends done after the restart', row.status === 'done', row.status);
    ledger.check('each deleted event counted once', row.deleted === EVENTS, `${row.deleted} of ${EVENTS}`);
    const left = await rowsOf(db.pool, doomed.appId);
    const { audit_log: audit, deletions, ...rest } = left;
    ledger.check('no row of the app is left', Object.keys(rest).length === 0, JSON.stringify(left));
    ledger.check(
      'the audit log and the deletion record stay',
      audit > 0 && deletions === 1,
      JSON.stringify(left),
    );
    const keptAfter = await rowsOf(db.pool, kept.appId);
    ledger.check(
      'the other app is untouched',
      JSON.stringify(keptAfter) === JSON.stringify(keptBefore),
      `${JSON.stringify(keptBefore)} → ${JSON.stringify(keptAfter)}`,
    );
    await server.kill('SIGKILL');
    return ledger.finish(
      `crash-app-deletion: events=${EVENTS} kills=${kills} seconds=${((Date.now() - started) / 1000).toFixed(1)}`,
    );
  } finally {
    await db.destroy();
  }
}

runScript('app deletion crash test', main);
