// Reads on a live hot standby: a primary and a standby streaming from it (replica-pair.mjs), the
// built server with DATABASE_READ_URL on the standby, and checks through HTTP that
//   - event and rollup reads are served by the standby (its pg_stat_activity shows them);
//   - the lag gauge moves while replay is paused, and reads move to the primary past the limit,
//     then come back once replay resumes;
//   - with the standby stopped, reads answer 200 from the primary, with no 5xx, including the
//     requests in flight when it stopped;
//   - after a restart of the standby, reads return to it;
//   - once the standby has caught up, a read through it finds every event ingest acknowledged.
//
// Usage: npm run test:replica   (node test/reliability/replica.mjs). Runs as root or as any user.
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import {
  assertBuilt,
  freePort,
  http,
  ingest,
  Ledger,
  makeTenant,
  runScript,
  sleep,
  startServer,
} from './harness.mjs';
import { query, startReplicaPair, switchedToPrimaryAt } from './replica-pair.mjs';
import { sample } from '../support/harness.js';

const MAX_LAG_MS = 1_500;
const RETURN_CHECKS = 3;
const WAIT_MS = 20_000;
const READERS = 4;

const ledger = new Ledger();

/** The value of a metric of the server now. */
async function metric(server, name, labels) {
  const res = await http(server.base, '/metrics');
  return res.status === 200 ? sample(res.text, name, labels) : undefined;
}

/** Polls `probe` every 50 ms until it is true; false after `ms`. */
async function until(probe, ms = WAIT_MS) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await probe()) return true;
    if (Date.now() > deadline) return false;
    // Poll interval of the wait on `probe`.
    await sleep(50);
  }
}

const routeIs = (server, target) => async () => (await metric(server, 'tally_read_route', { target })) === 1;

/** Ingest in the background, a batch of 10 every 50 ms; remembers every acknowledged eventId. */
function ingestLoop(server, tenant) {
  const acked = [];
  let failures = 0;
  let running = true;
  const done = (async () => {
    while (running) {
      const events = Array.from({ length: 10 }, () => ({
        eventName: 'Replica.probe',
        eventId: randomUUID(),
      }));
      const res = await ingest(server.base, tenant.ingestKey, events, 10_000);
      if (res.status === 200) acked.push(...events.map((e) => e.eventId));
      else failures++;
      // Pacing: a steady background load, one batch every 50 ms.
      await sleep(50);
    }
  })();
  return {
    acked,
    failures: () => failures,
    async stop() {
      running = false;
      await done;
    },
  };
}

function readEvents(server, tenant, limit = 50) {
  return http(server.base, `/api/v1/events?appId=${tenant.appId}&limit=${limit}`, {
    headers: { Authorization: `Bearer ${tenant.apiKey}` },
  });
}

/** Reads in `READERS` loops until stopped; every answer is kept with its start and end. */
function readLoop(server, tenant) {
  const answers = [];
  let running = true;
  const loops = Array.from({ length: READERS }, async () => {
    while (running) {
      const start = performance.now();
      const res = await readEvents(server, tenant);
      answers.push({ start, end: performance.now(), status: res.status ?? res.error });
    }
  });
  return {
    answers,
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

/**
 * Reads of the server's replica pool that the standby has seen, by the query's table. The
 * unfiltered events page runs in a transaction of its own (it sets enable_sort off for its one
 * statement), so its connection's last statement is that transaction's COMMIT; nothing else of
 * the replica pool in this script runs a transaction.
 */
async function standbyReads(standby, table) {
  const rows = await query(
    standby.url,
    `SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE application_name = 'tally-read-replica' AND (query ILIKE $1 OR ($2 AND query = 'COMMIT'))`,
    [`%FROM ${table}%`, table === 'events'],
  );
  return rows[0].n;
}

async function checkReadsOnStandby(server, pair, tenant, phase) {
  ledger.check(`${phase}: reads move to the standby`, await until(routeIs(server, 'replica')));
  // The server's replica pool shows each connection's last statement: check after each read.
  const events = await readEvents(server, tenant);
  ledger.check(
    `${phase}: events read answers 200`,
    events.status === 200,
    String(events.status ?? events.error),
  );
  ledger.check(`${phase}: the standby ran the events read`, (await standbyReads(pair.standby, 'events')) > 0);
  const rollups = await http(server.base, `/api/v1/rollups?appId=${tenant.appId}`, {
    headers: { Authorization: `Bearer ${tenant.apiKey}` },
  });
  ledger.check(
    `${phase}: rollups read answers 200`,
    rollups.status === 200,
    String(rollups.status ?? rollups.error),
  );
  ledger.check(
    `${phase}: the standby ran the rollups read`,
    (await standbyReads(pair.standby, 'rollups')) > 0,
  );
}

async function checkLagFallback(server, pair, tenant, load) {
  const before = (await metric(server, 'tally_read_route_switches_total', { to: 'primary' })) ?? 0;
  await pair.standby.pauseReplay();
  ledger.check(
    'paused replay: the lag gauge rises above 0',
    await until(async () => ((await metric(server, 'tally_read_replica_lag_seconds')) ?? 0) > 0),
  );
  ledger.check(
    'paused replay: reads move to the primary past READ_MAX_LAG_MS',
    await until(routeIs(server, 'primary')),
  );
  const lag = await metric(server, 'tally_read_replica_lag_seconds');
  ledger.check(
    'paused replay: the lag gauge shows the lag past the limit',
    lag > MAX_LAG_MS / 1000,
    String(lag),
  );
  const switches = await metric(server, 'tally_read_route_switches_total', { to: 'primary' });
  ledger.check('paused replay: the switch is counted', switches === before + 1, `${before} -> ${switches}`);
  // On the primary, a read sees the newest acknowledged event, which the paused standby lacks.
  const newest = load.acked[load.acked.length - 1];
  const res = await readEvents(server, tenant, 1000);
  const ids = new Set(res.status === 200 ? res.body.map((e) => e.eventId) : []);
  ledger.check(
    'paused replay: a read on the primary sees the newest acknowledged event',
    ids.has(newest),
    String(res.status ?? res.error),
  );
  await pair.standby.resumeReplay();
  ledger.check('resumed replay: reads return to the standby', await until(routeIs(server, 'replica')));
  const after = await metric(server, 'tally_read_replica_lag_seconds');
  ledger.check(
    'resumed replay: the lag gauge is back under the limit',
    after <= MAX_LAG_MS / 1000,
    String(after),
  );
}

async function checkStandbyStopped(server, pair, tenant) {
  const reads = readLoop(server, tenant);
  // Pacing: some reads are answered by the standby before it stops.
  await sleep(500);
  const stopAt = performance.now();
  const stopEpoch = Date.now();
  await pair.standby.stop();
  const goneAt = performance.now();
  await until(async () => reads.answers.some((a) => a.start > goneAt && a.status === 200), 5_000);
  // Pacing: the loop keeps reading a moment after the switch, so later answers are checked too.
  await sleep(300);
  await reads.stop();
  const inFlight = reads.answers.filter((a) => a.start < stopAt && a.end > stopAt);
  const bad = reads.answers.filter((a) => a.status !== 200);
  ledger.check(
    'standby stopped: reads kept going',
    reads.answers.some((a) => a.start > goneAt),
  );
  ledger.check(
    'standby stopped: requests were in flight when it stopped',
    inFlight.length > 0,
    `${reads.answers.length} reads`,
  );
  ledger.check(
    'standby stopped: every read answered 200 (no 5xx)',
    bad.length === 0,
    JSON.stringify(bad.slice(0, 5)),
  );
  ledger.check(
    'standby stopped: the route shows the primary',
    await until(routeIs(server, 'primary'), 5_000),
  );
  const switchedAt = switchedToPrimaryAt(server.output(), stopEpoch);
  ledger.check('standby stopped: the switch to the primary is logged', switchedAt !== null);
  ledger.check(
    'standby stopped: a read that lost its connection was retried on the primary',
    server.output().includes('reads moved to the primary: a read lost its connection'),
  );
  return switchedAt === null ? null : switchedAt - stopEpoch;
}

/** Pages through the app's events (from the standby) and returns their eventIds. */
async function allEventIds(server, tenant) {
  const ids = new Set();
  let cursor = '';
  for (;;) {
    const res = await http(server.base, `/api/v1/events?appId=${tenant.appId}&limit=1000${cursor}`, {
      headers: { Authorization: `Bearer ${tenant.apiKey}` },
    });
    if (res.status !== 200) throw new Error(`events page answered ${res.status ?? res.error}`);
    for (const e of res.body) ids.add(e.eventId);
    const next = res.headers.get('x-next-cursor');
    if (!next) return ids;
    cursor = `&cursor=${encodeURIComponent(next)}`;
  }
}

async function main() {
  await assertBuilt();
  const started = performance.now();
  const pair = await startReplicaPair('test-replica');
  let server;
  try {
    server = await startServer({
      databaseUrl: pair.primary.url,
      port: await freePort(),
      env: {
        DATABASE_READ_URL: pair.standby.url,
        READ_MAX_LAG_MS: String(MAX_LAG_MS),
        READ_RETURN_CHECKS: String(RETURN_CHECKS),
        LOG_LEVEL: 'warn',
        READ_MAX_CONCURRENT_PER_KEY: '1000',
        READ_TIME_MS_PER_SECOND: '1000000',
      },
    });
    const tenant = await makeTenant(pair.primary.url, 'replica-test');
    const load = ingestLoop(server, tenant);
    await until(() => load.acked.length > 0);
    await checkReadsOnStandby(server, pair, tenant, 'boot');
    await checkLagFallback(server, pair, tenant, load);
    const failoverMs = await checkStandbyStopped(server, pair, tenant);
    await pair.standby.start();
    await checkReadsOnStandby(server, pair, tenant, 'standby restarted');
    await load.stop();
    ledger.check('ingest: every batch acknowledged', load.failures() === 0, `${load.failures()} failed`);
    await pair.standby.caughtUp();
    ledger.check('caught up: reads are on the standby', await until(routeIs(server, 'replica')));
    const seen = await allEventIds(server, tenant);
    const missing = load.acked.filter((id) => !seen.has(id));
    ledger.check(
      'caught up: every acknowledged event is read back',
      missing.length === 0,
      `${missing.length} missing`,
    );
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    return ledger.finish(
      `replica: ${load.acked.length} events acknowledged, failover to the primary ${failoverMs} ms, run ${seconds} s`,
    );
  } catch (err) {
    if (server) process.stdout.write(`server output:\n${server.output().slice(-4000)}\n`);
    throw err;
  } finally {
    await server?.kill('SIGTERM');
    await pair.destroy();
  }
}

runScript('replica', main);
