// The backup and restore drill, on the embedded cluster, through the built server and CLI:
//   - ingest runs, `tally backup` is taken during it, more ingest follows, and a user who is in
//     the backup is erased (`tally users delete --wait`, recorded in the erasure ledger);
//   - the cluster is destroyed, and `tally restore` rebuilds it from the backup;
//   - then, through a server started on it: every event acknowledged before the backup started is
//     present exactly once, no batch is half there, the erased user's events are gone (the ledger
//     was re-applied) and new ones are refused, the rollups equal a fresh computation from the
//     events, and a second restore into the now non-empty cluster is refused with exit code 2.
//
// Usage: npm run test:restore   (node test/reliability/restore.mjs). Runs as root or as any user.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { connectionUrl, destroy, makeTemporaryDir } from '../../src/database/embedded-pg.mjs';
import {
  assertBuilt,
  freePort,
  ingest,
  Ledger,
  makeTenant,
  ROOT,
  runScript,
  sleep,
  startServer,
} from './harness.mjs';

const CLI_JS = path.join(ROOT, 'dist/src/cli/main.js');
const USERS = Array.from({ length: 10 }, (_, i) => `drill-user-${i}`);
const ERASED = USERS[3];
const BATCH = 20;

const ledger = new Ledger();

/** Runs the CLI on the embedded cluster of `env.EMBEDDED_PG_DIR`; resolves with its exit code and output. */
function tally(env, args) {
  return new Promise((resolve) => {
    const childEnv = { ...process.env, LOG_LEVEL: 'warn', ...env };
    delete childEnv.DATABASE_URL;
    if (env.DATABASE_URL) childEnv.DATABASE_URL = env.DATABASE_URL;
    execFile(
      process.execPath,
      [CLI_JS, ...args],
      { cwd: ROOT, env: childEnv, timeout: 120_000 },
      (err, stdout, stderr) => resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

function json(run, what) {
  if (run.code !== 0) throw new Error(`${what} failed (${run.code}): ${run.stderr.trim()}`);
  return JSON.parse(run.stdout);
}

/** Ingest in the background: batches of 20 events, two per user, each batch remembered with the time of its answer. */
function ingestLoop(server, tenant) {
  const batches = [];
  let failures = 0;
  let running = true;
  const done = (async () => {
    while (running) {
      const events = Array.from({ length: BATCH }, (_, i) => ({
        eventName: i % 2 ? 'Drill.viewed' : 'Drill.bought',
        eventId: randomUUID(),
        anonymousUserId: USERS[i % USERS.length],
        sessionId: `s-${USERS[i % USERS.length]}-${batches.length % 3}`,
      }));
      const res = await ingest(server.base, tenant.ingestKey, events, 10_000);
      if (res.status === 200 && res.body?.accepted === BATCH) {
        batches.push({ ackedAt: performance.now(), ids: events.map((e) => e.eventId), events });
      } else failures++;
      // A steady load: one batch every 20 ms.
      await sleep(20);
    }
  })();
  return {
    batches,
    failures: () => failures,
    async stop() {
      running = false;
      await done;
    },
  };
}

async function storedIds(pool, appId) {
  const { rows } = await pool.query(
    `SELECT event_id, anonymous_user_id AS user, count(*)::int AS n FROM events WHERE app_id = $1
      GROUP BY event_id, anonymous_user_id`,
    [appId],
  );
  return new Map(rows.map((r) => [r.event_id, r]));
}

function checkEvents(stored, batches, backupStartedAt) {
  const before = batches.filter((b) => b.ackedAt < backupStartedAt);
  const kept = (b) => b.events.filter((e) => e.anonymousUserId !== ERASED).map((e) => e.eventId);
  const notOnce = before.flatMap(kept).filter((id) => stored.get(id)?.n !== 1);
  ledger.check(
    `every event acknowledged before the backup started is there exactly once (${before.length} batches)`,
    before.length > 0 && notOnce.length === 0,
    `${notOnce.length} missing or doubled`,
  );
  const half = batches.filter((b) => {
    const present = kept(b).filter((id) => stored.has(id)).length;
    return present !== 0 && present !== kept(b).length;
  });
  ledger.check('no batch is half there', half.length === 0, `${half.length} batches in part`);
  const erased = [...stored.values()].filter((r) => r.user === ERASED);
  ledger.check("the erased user's events are gone", erased.length === 0, `${erased.length} left`);
  const extra = [...stored.keys()].filter((id) => !batches.some((b) => b.ids.includes(id)));
  ledger.check('no event that was not acknowledged', extra.length === 0, `${extra.length} unknown`);
}

/** The rollup rows of the app, and the same counts computed afresh from its events. */
async function rollupsAgainstEvents(pool, appId) {
  const order = 'ORDER BY day, is_test_mode, event_name';
  const { rows: stored } = await pool.query(
    `SELECT day::text AS day, is_test_mode, event_name, events::int AS events, unique_users::int AS users,
            unique_sessions::int AS sessions FROM rollups WHERE app_id = $1 ${order}`,
    [appId],
  );
  const { rows: fresh } = await pool.query(
    `SELECT day::text AS day, is_test_mode, event_name, events, users, sessions FROM (
       SELECT (ts AT TIME ZONE 'UTC')::date AS day, is_test_mode, event_name, count(*)::int AS events,
              count(DISTINCT anonymous_user_id)::int AS users, count(DISTINCT session_id)::int AS sessions
         FROM events WHERE app_id = $1 GROUP BY 1, 2, 3
       UNION ALL
       SELECT (ts AT TIME ZONE 'UTC')::date, is_test_mode, '', count(*)::int,
              count(DISTINCT anonymous_user_id)::int, count(DISTINCT session_id)::int
         FROM events WHERE app_id = $1 GROUP BY 1, 2) f ${order}`,
    [appId],
  );
  return { stored, fresh };
}

async function waitForRollups(pool, appId) {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM rollup_dirty WHERE app_id = $1`, [
      appId,
    ]);
    const { stored, fresh } = await rollupsAgainstEvents(pool, appId);
    if (rows[0].n === 0 && JSON.stringify(stored) === JSON.stringify(fresh)) return { stored, fresh };
    // The restored server's rollup task runs every second.
    await sleep(500);
  }
  return rollupsAgainstEvents(pool, appId);
}

/** Phase one: a server on a new cluster, ingest, a backup taken during it, more ingest, an erasure. */
async function beforeTheLoss(env, backupDir) {
  const server = await startServer({ databaseUrl: undefined, port: await freePort(), env });
  try {
    const url = connectionUrl(Number(env.EMBEDDED_PG_PORT));
    const tenant = await makeTenant(url, 'restore-drill');
    const load = ingestLoop(server, tenant);
    await sleep(3_000);
    const backupStartedAt = performance.now();
    const taken = performance.now();
    const backup = json(await tally(env, ['backup', '--out', backupDir, '--json']), 'tally backup');
    const backupMs = performance.now() - taken;
    ledger.check(
      'the backup is a physical one with its manifest',
      backup.format === 'physical',
      backup.format,
    );
    await sleep(2_000);
    await load.stop();
    ledger.check('ingest: every batch acknowledged', load.failures() === 0, `${load.failures()} failed`);
    const erasure = json(
      await tally({ ...env, DATABASE_URL: url }, [
        'users',
        'delete',
        '--app',
        tenant.appId,
        '--user',
        ERASED,
        '--wait',
        '--json',
      ]),
      'tally users delete',
    );
    ledger.check(
      'the erasure is done',
      erasure.status === 'done' && erasure.eventsDeleted > 0,
      JSON.stringify(erasure),
    );
    return { tenant, batches: load.batches, backupStartedAt, backupMs, backup, erasure };
  } finally {
    await server.kill('SIGTERM');
  }
}

/** Phase three: a server on the restored cluster, and the checks. */
async function afterTheRestore(env, before) {
  const server = await startServer({
    databaseUrl: undefined,
    port: await freePort(),
    env: { ...env, ROLLUPS_ENABLED: 'true', ROLLUP_INTERVAL_SECONDS: '1' },
  });
  const pool = new pg.Pool({ connectionString: connectionUrl(Number(env.EMBEDDED_PG_PORT)), max: 2 });
  try {
    const { tenant } = before;
    const { rows } = await pool.query(`SELECT status FROM deletions WHERE id = $1`, [before.erasure.id]);
    ledger.check('the erasure is done in the restored database', rows[0]?.status === 'done', rows[0]?.status);
    checkEvents(await storedIds(pool, tenant.appId), before.batches, before.backupStartedAt);
    const later = await ingest(server.base, tenant.ingestKey, [
      { eventName: 'Drill.viewed', eventId: randomUUID(), anonymousUserId: ERASED },
    ]);
    ledger.check(
      "the erased user's new events are refused",
      later.status === 200 && later.body.accepted === 0 && later.body.errors?.[0]?.code === 'user_suppressed',
      JSON.stringify(later.body ?? later.error),
    );
    const { stored, fresh } = await waitForRollups(pool, tenant.appId);
    ledger.check(
      'the rollups equal a fresh computation from the events',
      stored.length > 0 && JSON.stringify(stored) === JSON.stringify(fresh),
      `${JSON.stringify(stored).slice(0, 300)} vs ${JSON.stringify(fresh).slice(0, 300)}`,
    );
  } finally {
    await pool.end();
    await server.kill('SIGTERM');
  }
}

async function main() {
  await assertBuilt();
  const started = performance.now();
  delete process.env.DATABASE_URL;
  const dataDir = await makeTemporaryDir('restore-drill');
  const keep = await makeTemporaryDir('restore-drill-keep');
  const backupDir = path.join(keep, 'backup');
  const env = {
    EMBEDDED_PG_DIR: dataDir,
    EMBEDDED_PG_PORT: String(await freePort()),
    // The ledger lives apart from the cluster, as it must: it outlives the cluster's destruction.
    ERASURE_LEDGER_PATH: path.join(keep, 'erasure-ledger.ndjson'),
    ROLLUPS_ENABLED: 'false',
  };
  try {
    const before = await beforeTheLoss(env, backupDir);
    await destroy(dataDir);
    const t0 = performance.now();
    const restore = await tally(env, ['restore', '--from', backupDir, '--json']);
    const restoreMs = performance.now() - t0;
    const restored = json(restore, 'tally restore');
    ledger.check(
      'the restore re-applied the erasure from the ledger',
      restored.ledger.reapplied.includes(before.erasure.id),
      JSON.stringify(restored.ledger),
    );
    await afterTheRestore(env, before);
    const again = await tally(env, ['restore', '--from', backupDir, '--json']);
    ledger.check(
      'a second restore into the now non-empty cluster is refused with exit code 2',
      again.code === 2 && /already holds a cluster/.test(again.stderr),
      `${again.code}: ${again.stderr.trim()}`,
    );
    const acked = before.batches.length * BATCH;
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    return ledger.finish(
      `restore: ${acked} events acknowledged, backup ${(before.backupMs / 1000).toFixed(1)} s ` +
        `(${(before.backup.bytes / 1_048_576).toFixed(1)} MB), restore ${(restoreMs / 1000).toFixed(1)} s, run ${seconds} s`,
    );
  } finally {
    await destroy(dataDir).catch(() => undefined);
    await fs.rm(keep, { recursive: true, force: true });
  }
}

runScript('restore', main);
