// Crash consistency: an event that got a 200 survives a kill -9 of the server, exactly once,
// and a batch that got no answer is stored all or nothing; retrying it (as an SDK does) makes
// it complete exactly once.
//
// Each round drives ingest with several concurrent clients, kills the server with SIGKILL at
// a random moment mid-load, checks the unanswered batches before retrying them, restarts the
// server, retries, and then checks every batch of the round in the database.
//
// Usage: npm run test:crash   (node test/reliability/crash.mjs [--rounds N])
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import {
  assertBuilt,
  freePort,
  ingest,
  Ledger,
  makeTenant,
  sleep,
  startDatabase,
  startServer,
  storedCounts,
  runScript,
} from './harness.mjs';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    clients: { type: 'string', default: '8' },
    'batch-size': { type: 'string', default: '50' },
  },
});
const ROUNDS = Number(values.rounds);
const CLIENTS = Number(values.clients);
const BATCH = Number(values['batch-size']);
// Bounds that keep the script well under two minutes whatever the server does.
const MAX_BATCHES_PER_CLIENT = 400;
const REQUEST_TIMEOUT_MS = 10_000;
const RETRY_DEADLINE_MS = 20_000;
const DEADLINE = Date.now() + 110_000;

const ledger = new Ledger();
const totals = {
  acknowledged: 0,
  found: 0,
  lost: 0,
  duplicated: 0,
  partial: 0,
  unanswered: 0,
  committedUnanswered: 0,
  restartMs: 0,
};

function makeBatch(round, client, seq) {
  const tag = `${round}-${client}-${seq}-${randomUUID().slice(0, 8)}`;
  const now = Date.now();
  const events = Array.from({ length: BATCH }, (_, i) => ({
    eventName: 'Crash.probe',
    eventId: `crash-${tag}-${i}`,
    eventTime: now,
    anonymousUserId: `u-${client}`,
    payload: { round, client, seq, i },
  }));
  return { tag, events, eventIds: events.map((e) => e.eventId), state: 'new', answers: [] };
}

/** Classifies an answer: `acked`, `retry` (no answer, 503 or 429) or `bad`. */
function classify(batch, res) {
  batch.answers.push(res.error ?? res.status);
  if (res.error || res.status === 503 || res.status === 429) return 'retry';
  if (res.status !== 200) return 'bad';
  const b = res.body ?? {};
  const consistent = b.received === BATCH && b.rejected === 0 && b.accepted + b.duplicates === BATCH;
  return consistent ? 'acked' : 'bad';
}

/** Runs one round on a running server; returns the restarted server for the next round. */
async function runRound(round, db, tenant, port, running) {
  let server = running;
  const batches = [];
  const control = { stop: false };

  const client = async (c) => {
    for (let seq = 0; seq < MAX_BATCHES_PER_CLIENT && !control.stop; seq++) {
      const batch = makeBatch(round, c, seq);
      batches.push(batch);
      const res = await ingest(server.base, tenant.ingestKey, batch.events, REQUEST_TIMEOUT_MS);
      batch.state = classify(batch, res);
      if (batch.state === 'bad') {
        ledger.check(
          `round ${round}: batch ${batch.tag} answered sensibly`,
          false,
          JSON.stringify(res.body ?? res.text),
        );
      }
      if (res.error) return; // the server is gone; this client waits for the restart
    }
  };
  const load = Array.from({ length: CLIENTS }, (_, c) => client(c));
  // Pacing, not a condition: the kill lands at a random moment of the load, which is the test.
  await sleep(300 + Math.floor(Math.random() * 1200));
  control.stop = true;
  const signal = await server.kill('SIGKILL');
  await Promise.all(load);
  ledger.check(`round ${round}: server died of SIGKILL`, signal === 'SIGKILL', String(signal));

  // Before any retry: an unanswered batch is either wholly stored or not at all.
  const unanswered = batches.filter((b) => b.state === 'retry');
  totals.unanswered += unanswered.length;
  for (const batch of unanswered) {
    const counts = await storedCounts(db.pool, tenant.appId, batch.eventIds);
    const present = [...counts.values()].filter((n) => n > 0).length;
    if (present === BATCH) totals.committedUnanswered++;
    if (present !== 0 && present !== BATCH) totals.partial++;
    ledger.check(
      `round ${round}: unanswered batch ${batch.tag} is all or nothing`,
      present === 0 || present === BATCH,
      `${present} of ${BATCH} stored`,
    );
  }

  const restartStarted = Date.now();
  server = await startServer({ databaseUrl: db.url, port });
  totals.restartMs = Math.max(totals.restartMs, Date.now() - restartStarted);
  const retryDeadline = Date.now() + RETRY_DEADLINE_MS;
  for (const batch of unanswered) {
    while (batch.state === 'retry' && Date.now() < retryDeadline) {
      const res = await ingest(server.base, tenant.ingestKey, batch.events, REQUEST_TIMEOUT_MS);
      batch.state = classify(batch, res);
      // A client's pause between retries (pacing); the loop itself waits on the batch's answer.
      if (batch.state === 'retry') await sleep(200);
    }
    ledger.check(
      `round ${round}: retried batch ${batch.tag} acknowledged`,
      batch.state === 'acked',
      batch.answers.join(','),
    );
  }

  // After the retries every acknowledged batch is stored exactly once, event by event.
  const acked = batches.filter((b) => b.state === 'acked');
  const ids = acked.flatMap((b) => b.eventIds);
  const counts = await storedCounts(db.pool, tenant.appId, ids);
  let lost = 0;
  let duplicated = 0;
  for (const n of counts.values()) {
    if (n === 0) lost++;
    if (n > 1) duplicated++;
  }
  totals.acknowledged += ids.length;
  totals.found += ids.length - lost;
  totals.lost += lost;
  totals.duplicated += duplicated;
  ledger.check(`round ${round}: no acknowledged event lost`, lost === 0, `${lost} lost`);
  ledger.check(`round ${round}: no event stored twice`, duplicated === 0, `${duplicated} duplicated`);
  ledger.check(`round ${round}: load reached the server`, acked.length > 0, `${batches.length} batches sent`);
  process.stdout.write(
    `round ${round}: ${batches.length} batches, ${acked.length} acknowledged, ${unanswered.length} unanswered at the kill\n`,
  );
  return server;
}

async function main() {
  const started = Date.now();
  await assertBuilt();
  const db = await startDatabase('crash');
  try {
    const tenant = await makeTenant(db.url, 'crash-consistency');
    const port = await freePort();
    let server = await startServer({ databaseUrl: db.url, port });
    let round = 0;
    while (round < ROUNDS && Date.now() < DEADLINE) {
      round++;
      server = await runRound(round, db, tenant, port, server);
    }
    await server.kill('SIGKILL');
    ledger.check('every round ran in the time bound', round === ROUNDS, `${round} of ${ROUNDS}`);
    // No row outside what the clients sent, and no duplicate anywhere in the app.
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS total, count(DISTINCT event_id)::int AS distinct_ids
         FROM events WHERE app_id = $1`,
      [tenant.appId],
    );
    ledger.check(
      'the app holds exactly the acknowledged events',
      rows[0].total === totals.acknowledged && rows[0].distinct_ids === totals.acknowledged,
      `${rows[0].total} rows, ${rows[0].distinct_ids} distinct, ${totals.acknowledged} acknowledged`,
    );
    return ledger.finish(
      `crash: rounds=${round} acknowledged=${totals.acknowledged} found=${totals.found} lost=${totals.lost} ` +
        `duplicated=${totals.duplicated} partial=${totals.partial} unanswered_batches=${totals.unanswered} ` +
        `committed_but_unanswered=${totals.committedUnanswered} slowest_restart_ms=${totals.restartMs} seconds=${((Date.now() - started) / 1000).toFixed(1)}`,
    );
  } finally {
    await db.destroy();
  }
}

runScript('crash test', main);
