/* global fetch */
// Two Tally instances against one PostgreSQL and one Redis, as behind a load balancer.
//
//   npm run test:multi     (builds, then runs this file)
//
// Shows that (a) a per-key rate limit holds across both instances together, (b) rollups computed
// while both run are correct and gated by the advisory lock, one computation at a time, and
// (c) a key revoked through the CLI stops working on both within 30 s, and (d) a tracking plan
// stored through one instance is applied by the other within 1 s. Creates a fresh database
// and a unique Redis key prefix, and removes both at the end. Prints `N passed, M failed` and
// exits non-zero on any failure.
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import pg from 'pg';
import Redis from 'ioredis';
import { cli, freePort, http, ingest, makeTenant, ROOT, sleep } from '../reliability/harness.mjs';
import { startNodeProcess } from '../support/harness.js';

const MAIN = path.join(ROOT, 'dist', 'src', 'main.js');
const ADMIN_URL = process.env.MULTI_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.MULTI_REDIS_URL ?? 'redis://127.0.0.1:6379';
// The advisory lock id the rollup computation takes (src/rollups/rollup-computation.repository.ts).
const ROLLUP_LOCK_ID = 7_310_002; // ADVISORY_LOCKS.rollups in src/database/advisory-locks.ts
const RATE_LIMIT = 10;
const REVOCATION_BOUND_MS = 30_000;

const suffix = randomUUID().replace(/-/g, '').slice(0, 10);
const dbName = `tally_multi_${suffix}`;
const redisPrefix = `tally-multi-${suffix}:`;
const databaseUrl = (() => {
  const u = new URL(ADMIN_URL);
  u.pathname = `/${dbName}`;
  return u.toString();
})();

const results = [];
function check(name, ok, detail = '') {
  results.push({ name, ok });
  process.stdout.write(`${ok ? 'ok    ' : 'FAILED'} ${name}${detail ? ` (${detail})` : ''}\n`);
  return ok;
}

const env = {
  ...process.env,
  DATABASE_URL: databaseUrl,
  DATABASE_READ_URL: '',
  REDIS_URL,
  REDIS_KEY_PREFIX: redisPrefix,
  LOG_LEVEL: 'warn',
  HOST: '127.0.0.1',
  DATABASE_POOL_SIZE: '4',
  INGEST_RATE_REQUESTS: String(RATE_LIMIT),
  READ_RATE_REQUESTS: '100000',
  // One window for the whole run, so that the limit check cannot straddle two windows.
  RATE_WINDOW_MS: '600000',
  AUTH_FAILURE_LIMIT: '100000',
  ROLLUPS_ENABLED: 'true',
  ROLLUP_INTERVAL_SECONDS: '1',
  SHUTDOWN_TIMEOUT_MS: '15000',
};

async function startInstance(name, port) {
  const server = await startNodeProcess(MAIN, {
    env: { ...env, PORT: String(port) },
    timeoutMs: 90_000,
  }).catch((err) => {
    throw new Error(`${name}: ${err.message}`);
  });
  const exited = server.exited.then(({ code }) => code);
  return { name, port, child: server.child, exited, base: `http://127.0.0.1:${port}`, output: server.output };
}

function readRollups(instance, apiKey, appId) {
  return http(instance.base, `/api/v1/rollups?appId=${appId}`, {
    headers: { Authorization: `Bearer ${apiKey}` },
  });
}

/** The rollup rows the read API must return for `events`, all sent today and in live mode. */
function expectedRollups(appId, events) {
  const day = new Date().toISOString().slice(0, 10);
  const group = (name, list) => {
    const floats = list.map((e) => e.floatValue).filter((v) => v !== undefined);
    return {
      appId,
      date: day,
      eventName: name,
      isTestMode: false,
      events: list.length,
      uniqueUsers: new Set(list.map((e) => e.anonymousUserId)).size,
      uniqueSessions: new Set(list.map((e) => e.sessionId)).size,
      floatCount: floats.length,
      floatSum: floats.reduce((a, b) => a + b, 0),
    };
  };
  const names = [...new Set(events.map((e) => e.eventName))].sort();
  return [
    group(null, events),
    ...names.map((n) =>
      group(
        n,
        events.filter((e) => e.eventName === n),
      ),
    ),
  ];
}

function comparable(rows) {
  return (rows ?? []).map((r) => ({
    appId: r.appId,
    date: r.date,
    eventName: r.eventName,
    isTestMode: r.isTestMode,
    events: r.events,
    uniqueUsers: r.uniqueUsers,
    uniqueSessions: r.uniqueSessions,
    floatCount: r.floatValue ? r.floatValue.count : 0,
    floatSum: r.floatValue ? Math.round(r.floatValue.sum * 1000) / 1000 : 0,
  }));
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

const SUPPRESSION_BOUND_MS = 1_000;

/** Ingest keys for the suppression probe: each may send RATE_LIMIT requests in the run's window. */
async function ingestKeys(appId, n) {
  const keys = [];
  for (let i = 0; i < n; i++)
    keys.push((await cli(databaseUrl, ['keys', 'create-ingest', '--app', appId])).key);
  return keys;
}

async function checkSuppression(a, b) {
  const tenant = await makeTenant(databaseUrl, 'multi-instance-erasure');
  const privacy = await cli(databaseUrl, [
    'keys',
    'create-api',
    '--app',
    tenant.appId,
    '--scope',
    'privacy:write',
  ]);
  const keys = await ingestKeys(tenant.appId, 4);
  let probes = 0;
  const probe = async () => {
    const key = keys[Math.floor(probes++ / (RATE_LIMIT - 1)) % keys.length];
    const res = await ingest(b.base, key, [{ eventName: 'Erasure.probe', anonymousUserId: 'multi-gone' }]);
    return res.body?.errorCounts?.user_suppressed === 1
      ? 'refused'
      : res.body?.accepted === 1
        ? 'accepted'
        : res.status;
  };
  check('B accepts the user before the deletion', (await probe()) === 'accepted');
  const res = await fetch(`${a.base}/api/v1/deletions`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${privacy.key}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ appId: tenant.appId, anonymousUserIds: ['multi-gone'] }),
  });
  const answeredAt = Date.now();
  const deletion = await res.json();
  check('A answers the deletion with 202', res.status === 202, `${res.status}`);
  let refusedAfter;
  while (Date.now() - answeredAt < SUPPRESSION_BOUND_MS * 2 && probes < keys.length * (RATE_LIMIT - 1)) {
    if ((await probe()) === 'refused') {
      refusedAfter = Date.now() - answeredAt;
      break;
    }
    // Poll interval of the wait on B refusing the user.
    await sleep(50);
  }
  check(
    `a suppression made through A refuses the user's events on B within 1 s`,
    refusedAfter !== undefined && refusedAfter <= SUPPRESSION_BOUND_MS,
    refusedAfter === undefined ? 'still accepted' : `after ${refusedAfter} ms`,
  );
  let status;
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const got = await fetch(`${b.base}/api/v1/deletions/${deletion.id}`, {
      headers: { Authorization: `Bearer ${privacy.key}` },
    });
    status = (await got.json()).status;
    if (status === 'done') break;
    // Poll interval of the wait on the deletion ending.
    await sleep(100);
  }
  check('the deletion ends done, seen through B', status === 'done', String(status));
}

const PLAN_BOUND_MS = 1_000;

/**
 * Stores a plan through `a` that rejects unplanned events, and polls `b`'s dry run (which applies
 * the plan ingest would, from the same per-instance cache) until it rejects one. `b` has compiled
 * the app's previous plan first, so only the notification can explain a quick change.
 */
async function checkPlanPropagation(a, b) {
  const app = await cli(databaseUrl, ['apps', 'create', '--name', 'multi-plans']);
  const key = await cli(databaseUrl, [
    'keys',
    'create-api',
    '--app',
    app.id,
    '--scope',
    'plans:read',
    '--scope',
    'plans:write',
  ]);
  const headers = { Authorization: `Bearer ${key.key}`, 'Content-Type': 'application/json' };
  const probe = (instance) =>
    http(instance.base, `/api/v1/plan/check?appId=${app.id}`, {
      method: 'POST',
      headers,
      body: { events: [{ eventName: 'Plan.probe' }] },
    });
  const put = (instance, version, plan) =>
    http(instance.base, `/api/v1/plan?appId=${app.id}`, {
      method: 'PUT',
      headers: { ...headers, 'If-Match': `"${version}"` },
      body: plan,
    });
  const first = await put(a, 0, { mode: 'enforce', unplanned: 'allow' });
  const warm = await probe(b);
  check('a plan is stored and applied', first.status === 200 && warm.body?.accepted === 1, `${first.status}`);
  const stored = await put(a, 1, { mode: 'enforce', unplanned: 'reject' });
  const storedAt = Date.now();
  let after;
  while (after === undefined && Date.now() - storedAt < PLAN_BOUND_MS + 4_000) {
    const res = await probe(b);
    if (res.body?.rejected === 1 && res.body.errors?.[0]?.code === 'unplanned_event')
      after = Date.now() - storedAt;
    // Poll interval of the wait on the new plan being in force.
    else await sleep(20);
  }
  check(
    `a plan change through ${a.name} is in force on ${b.name} within 1 s`,
    stored.status === 200 && after !== undefined && after <= PLAN_BOUND_MS,
    after === undefined ? 'not applied' : `after ${after} ms`,
  );
}

async function main() {
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const redis = new Redis(REDIS_URL);
  const db = new pg.Client({ connectionString: databaseUrl });
  const instances = [];
  try {
    // Both start together: the migration advisory lock lets exactly one apply the schema.
    const started = await Promise.allSettled([
      startInstance('A', await freePort()),
      startInstance('B', await freePort()),
    ]);
    for (const s of started) if (s.status === 'fulfilled') instances.push(s.value);
    const failed = started.find((s) => s.status === 'rejected');
    if (failed) throw failed.reason;
    const [a, b] = instances;
    check('two instances start together on a fresh database', true, `ports ${a.port}, ${b.port}`);
    await db.connect();

    const tenant = await makeTenant(databaseUrl, 'multi-instance');
    const probe = await makeTenant(databaseUrl, 'multi-instance-limit');

    // (a) One per-key limit across both instances.
    const statuses = [];
    for (let i = 0; i < RATE_LIMIT * 2; i++) {
      const { status } = await ingest(instances[i % 2].base, probe.ingestKey, [{ eventName: 'Limit.probe' }]);
      statuses.push(status);
    }
    const accepted = statuses.filter((s) => s === 200).length;
    const limitedCount = statuses.filter((s) => s === 429).length;
    check(
      `per-key rate limit of ${RATE_LIMIT} holds over both instances together`,
      accepted === RATE_LIMIT && limitedCount === RATE_LIMIT,
      `${accepted} accepted, ${limitedCount} limited of ${statuses.length} alternating requests`,
    );
    const counters = await redis.keys(`${redisPrefix}*`);
    check('the counters live in Redis', counters.length > 0, `${counters.length} keys under ${redisPrefix}`);

    // (b) Rollups. Hold the computation lock from here: neither instance may compute meanwhile.
    await db.query('SELECT pg_advisory_lock($1)', [ROLLUP_LOCK_ID]);
    const sent = [];
    for (let batch = 0; batch < 6; batch++) {
      const events = Array.from({ length: 40 }, (_, i) => ({
        eventName: ['Checkout.completed', 'App.opened', 'Screen.viewed'][i % 3],
        eventId: `multi-${batch}-${i}`,
        anonymousUserId: `user-${(batch * 40 + i) % 17}`,
        sessionId: `session-${(batch * 40 + i) % 23}`,
        eventTime: Date.now(),
        ...(i % 4 === 0 ? { floatValue: (i % 7) + 0.5 } : {}),
      }));
      const res = await ingest(instances[batch % 2].base, tenant.ingestKey, events);
      if (res.status === 200 && res.body?.accepted === events.length) sent.push(...events);
      else check(`ingest batch ${batch} on ${instances[batch % 2].name}`, false, JSON.stringify(res));
    }
    check(
      '240 events acknowledged through both instances',
      sent.length === 240,
      `${sent.length} acknowledged`,
    );
    // Waiting for something NOT to happen has no signal: three rollup intervals pass, and none may run.
    await sleep(3_500);
    const gated = await readRollups(a, tenant.apiKey, tenant.appId);
    check(
      'no rollup is computed while another session holds the advisory lock',
      gated.status === 200 && Array.isArray(gated.body) && gated.body.length === 0,
      `${gated.status}, ${Array.isArray(gated.body) ? gated.body.length : '?'} rows after 3 intervals`,
    );
    await db.query('SELECT pg_advisory_unlock($1)', [ROLLUP_LOCK_ID]);

    const expected = expectedRollups(tenant.appId, sent);
    let got = [];
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      got = comparable((await readRollups(a, tenant.apiKey, tenant.appId)).body);
      if (same(got, expected)) break;
      // Poll interval of a wait on the rollups becoming correct.
      await sleep(500);
    }
    check(
      'rollups computed while both instances run are correct',
      same(got, expected),
      same(got, expected)
        ? `${got.length} rows`
        : `got ${JSON.stringify(got)}\nexpected ${JSON.stringify(expected)}`,
    );
    // Several more runs on both instances must not count anything twice.
    // Again an absence (no double count over several more runs): three intervals, then the check.
    await sleep(3_500);
    const fromA = comparable((await readRollups(a, tenant.apiKey, tenant.appId)).body);
    const fromB = comparable((await readRollups(b, tenant.apiKey, tenant.appId)).body);
    check(
      'repeated runs on both instances never double count',
      same(fromA, expected) && same(fromB, expected),
    );
    const stored = await db.query(
      `SELECT count(*)::int AS n FROM rollups WHERE app_id = $1 AND event_name = ''`,
      [tenant.appId],
    );
    check('one total row per day in the rollups table', stored.rows[0].n === 1, `${stored.rows[0].n} row(s)`);

    // (d) A tracking-plan change stored through one instance is in force on the other within 1 s.
    await checkPlanPropagation(a, b);

    // (c) Revocation through the CLI reaches both instances within 30 s, caches included.
    for (const instance of instances) {
      const res = await fetch(`${instance.base}/api/v1/events?appId=${tenant.appId}&limit=1`, {
        headers: { Authorization: `Bearer ${tenant.apiKey}` },
      });
      if (res.status !== 200)
        check(`API key works on ${instance.name} before revocation`, false, `${res.status}`);
    }
    const revoked = await cli(databaseUrl, ['keys', 'revoke', tenant.apiKeyId]);
    const revokedAt = Date.now();
    check('the CLI revokes the key', revoked.id === tenant.apiKeyId && typeof revoked.revokedAt === 'string');
    const stoppedAfter = {};
    while (
      Object.keys(stoppedAfter).length < instances.length &&
      Date.now() - revokedAt < REVOCATION_BOUND_MS + 5_000
    ) {
      for (const instance of instances) {
        if (stoppedAfter[instance.name] !== undefined) continue;
        const res = await fetch(`${instance.base}/api/v1/events?appId=${tenant.appId}&limit=1`, {
          headers: { Authorization: `Bearer ${tenant.apiKey}` },
        });
        const body = await res.json().catch(() => null);
        if (res.status === 401 && body?.code === 'invalid_key')
          stoppedAfter[instance.name] = Date.now() - revokedAt;
      }
      // Poll interval of a wait on each instance refusing the key.
      await sleep(250);
    }
    for (const instance of instances) {
      const ms = stoppedAfter[instance.name];
      check(
        `revoked key refused by ${instance.name} within 30 s`,
        ms !== undefined && ms <= REVOCATION_BOUND_MS,
        ms === undefined ? 'still accepted' : `after ${(ms / 1000).toFixed(1)} s`,
      );
    }

    // (d) A suppression made through A refuses the user's events on B within 1 s.
    await checkSuppression(a, b);

    // Both drain and exit 0 on SIGTERM.
    for (const instance of instances) instance.child.kill('SIGTERM');
    const codes = await Promise.all(instances.map((i) => i.exited));
    check(
      'both instances exit 0 on SIGTERM',
      codes.every((c) => c === 0),
      `exit codes ${codes.join(', ')}`,
    );
  } catch (err) {
    check('run completed', false, err instanceof Error ? err.message : String(err));
    for (const instance of instances) {
      const tail = instance.output().split('\n').slice(-15).join('\n');
      if (tail.trim()) process.stdout.write(`--- ${instance.name} output ---\n${tail}\n`);
    }
  } finally {
    for (const instance of instances) {
      if (instance.child.exitCode === null) {
        instance.child.kill('SIGKILL');
        await instance.exited;
      }
    }
    await db.end().catch(() => undefined);
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
    const keys = await redis.keys(`${redisPrefix}*`);
    if (keys.length) await redis.del(...keys);
    await redis.quit();
  }
  const failed = results.filter((r) => !r.ok).length;
  process.stdout.write(`\n${results.length - failed} passed, ${failed} failed\n`);
  process.exit(failed === 0 ? 0 : 1);
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : err}\n`);
  process.exit(1);
});
