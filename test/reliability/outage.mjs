// Database outage: with PostgreSQL stopped under a running server, ingest and both reads answer
// 503 with Retry-After and problem+json within a bounded time (no hang, no 500, no crash) and
// /readyz fails; once PostgreSQL is back the same server process recovers by itself and the
// batches that got 503 land exactly once when retried.
//
// Usage: npm run test:outage   (node test/reliability/outage.mjs)
import { randomUUID } from 'node:crypto';
import {
  assertBuilt,
  freePort,
  http,
  ingest,
  Ledger,
  makeTenant,
  sleep,
  startDatabase,
  startServer,
  storedCounts,
  runScript,
} from './harness.mjs';

const ANSWER_BOUND_MS = 6_000;
const RECOVERY_DEADLINE_MS = 30_000;
const BATCH = 20;
const LOAD_CLIENTS = 4;

const ledger = new Ledger();
const figures = { acknowledged: 0, found: 0, lost: 0, duplicated: 0, slowest503Ms: 0, recoveryMs: 0 };

function makeBatch(label) {
  const tag = `${label}-${randomUUID().slice(0, 8)}`;
  const events = Array.from({ length: BATCH }, (_, i) => ({
    eventName: 'Outage.probe',
    eventId: `outage-${tag}-${i}`,
    eventTime: Date.now(),
  }));
  return { tag, events, eventIds: events.map((e) => e.eventId), acked: false, answers: [] };
}

function isProblem(res) {
  return (
    (res.headers?.get('content-type') ?? '').startsWith('application/problem+json') &&
    typeof res.body?.code === 'string'
  );
}

/** Asserts a bounded 503 outage answer with Retry-After and a problem document. */
function expectOutageAnswer(name, res) {
  figures.slowest503Ms = Math.max(figures.slowest503Ms, res.ms);
  const what = res.error ?? `${res.status} ${res.text?.slice(0, 200)}`;
  ledger.check(
    `${name}: answered within ${ANSWER_BOUND_MS} ms`,
    !res.error && res.ms < ANSWER_BOUND_MS,
    `${what} after ${Math.round(res.ms)} ms`,
  );
  ledger.check(`${name}: 503`, res.status === 503, what);
  const retryAfter = Number(res.headers?.get('retry-after'));
  ledger.check(
    `${name}: Retry-After in seconds`,
    Number.isInteger(retryAfter) && retryAfter > 0,
    String(res.headers?.get('retry-after')),
  );
  ledger.check(
    `${name}: problem+json service_unavailable`,
    isProblem(res) && res.body.code === 'service_unavailable',
    what,
  );
}

async function main() {
  const started = Date.now();
  await assertBuilt();
  const db = await startDatabase('outage');
  let server;
  try {
    const tenant = await makeTenant(db.url, 'outage');
    server = await startServer({ databaseUrl: db.url, port: await freePort() });
    const { base } = server;
    const auth = (key) => ({ Authorization: `Bearer ${key}` });
    const reads = {
      events: () =>
        http(base, `/api/v1/events?appId=${tenant.appId}&limit=10`, {
          headers: auth(tenant.apiKey),
          timeoutMs: ANSWER_BOUND_MS + 4000,
        }),
      rollups: () =>
        http(base, `/api/v1/rollups?appId=${tenant.appId}`, {
          headers: auth(tenant.apiKey),
          timeoutMs: ANSWER_BOUND_MS + 4000,
        }),
    };
    const batches = [];
    const send = async (batch) => {
      const res = await ingest(base, tenant.ingestKey, batch.events, ANSWER_BOUND_MS + 4000);
      batch.answers.push(res.error ?? res.status);
      if (res.status === 200 && res.body?.accepted + res.body?.duplicates === BATCH) batch.acked = true;
      return res;
    };

    // Healthy first.
    const warm = makeBatch('warm');
    batches.push(warm);
    ledger.check('before: ingest 200', (await send(warm)).status === 200, warm.answers.join(','));
    ledger.check('before: events 200', (await reads.events()).status === 200);
    ledger.check('before: rollups 200', (await reads.rollups()).status === 200);
    const readyBefore = await http(base, '/readyz');
    ledger.check(
      'before: /readyz 200',
      readyBefore.status === 200,
      String(readyBefore.status ?? readyBefore.error),
    );

    // Stop PostgreSQL while clients keep sending: every answer is a 200 or a 503, never a 500.
    const control = { stop: false };
    const unexpected = [];
    const load = Array.from({ length: LOAD_CLIENTS }, async (_, c) => {
      for (let seq = 0; !control.stop && seq < 500; seq++) {
        const batch = makeBatch(`load-${c}-${seq}`);
        batches.push(batch);
        const res = await send(batch);
        if (res.error || (res.status !== 200 && res.status !== 503)) unexpected.push(res.error ?? res.status);
        // A client's pause after a 503, as SDKs do (pacing).
        if (res.status === 503) await sleep(100);
      }
    });
    // Pacing: load runs for a while before the stop, and on during it; what is checked is every answer.
    await sleep(300);
    await db.stop();
    await sleep(500);
    control.stop = true;
    await Promise.all(load);
    ledger.check(
      'during the stop: only 200 or 503',
      unexpected.length === 0,
      unexpected.slice(0, 10).join(','),
    );

    // Down: each endpoint answers a bounded 503, twice (the second exercises a drained pool).
    for (let attempt = 1; attempt <= 2; attempt++) {
      const batch = makeBatch(`down-${attempt}`);
      batches.push(batch);
      expectOutageAnswer(`down #${attempt}: ingest`, await send(batch));
      expectOutageAnswer(`down #${attempt}: events`, await reads.events());
      expectOutageAnswer(`down #${attempt}: rollups`, await reads.rollups());
    }
    const readyDown = await http(base, '/readyz', { timeoutMs: ANSWER_BOUND_MS + 4000 });
    ledger.check(
      'down: /readyz fails',
      !readyDown.error && readyDown.status >= 500 && readyDown.ms < ANSWER_BOUND_MS,
      `${readyDown.error ?? readyDown.status} after ${Math.round(readyDown.ms)} ms`,
    );
    const liveDown = await http(base, '/healthz');
    ledger.check(
      'down: /healthz still 200 (liveness)',
      liveDown.status === 200,
      String(liveDown.status ?? liveDown.error),
    );
    ledger.check('down: the server process is alive', server.isAlive());

    // Back: the same process recovers, and retried batches land exactly once.
    const restartedAt = Date.now();
    await db.start();
    const deadline = Date.now() + RECOVERY_DEADLINE_MS;
    for (const batch of batches.filter((b) => !b.acked)) {
      while (!batch.acked && Date.now() < deadline) {
        const res = await send(batch);
        // A client's pause between retries (pacing); the loop waits on the acknowledgement.
        if (!batch.acked) await sleep(res.status === 503 ? 500 : 100);
      }
      ledger.check(`after: batch ${batch.tag} acknowledged on retry`, batch.acked, batch.answers.join(','));
    }
    figures.recoveryMs = Date.now() - restartedAt;
    let ready;
    while (Date.now() < deadline) {
      ready = await http(base, '/readyz');
      if (ready.status === 200) break;
      // Poll interval of a wait on /readyz answering 200.
      await sleep(250);
    }
    ledger.check('after: /readyz 200 again', ready?.status === 200, String(ready?.status ?? ready?.error));
    ledger.check('after: events 200', (await reads.events()).status === 200);
    ledger.check('after: rollups 200', (await reads.rollups()).status === 200);
    ledger.check('after: the same server process served throughout', server.isAlive(), `pid ${server.pid}`);

    const ids = batches.flatMap((b) => b.eventIds);
    const counts = await storedCounts(db.pool, tenant.appId, ids);
    for (const n of counts.values()) {
      if (n === 0) figures.lost++;
      if (n > 1) figures.duplicated++;
    }
    figures.acknowledged = batches.filter((b) => b.acked).length * BATCH;
    figures.found = [...counts.values()].filter((n) => n > 0).length;
    ledger.check('after: every event of every batch stored', figures.lost === 0, `${figures.lost} missing`);
    ledger.check(
      'after: no event stored twice',
      figures.duplicated === 0,
      `${figures.duplicated} duplicated`,
    );

    return ledger.finish(
      `outage: rounds=1 acknowledged=${figures.acknowledged} found=${figures.found} lost=${figures.lost} ` +
        `duplicated=${figures.duplicated} batches=${batches.length} ` +
        `retried=${batches.filter((b) => b.answers.length > 1).length} slowest_503_ms=${Math.round(figures.slowest503Ms)} ` +
        `recovery_ms=${figures.recoveryMs} seconds=${((Date.now() - started) / 1000).toFixed(1)}`,
    );
  } finally {
    await server?.kill('SIGTERM');
    await db.destroy();
  }
}

runScript('outage test', main);
