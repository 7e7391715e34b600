/* global fetch */
// `npm run bench -- --erasure`: erasure of a heavy user. An app holds EVENTS events over DAYS days
// (2 million over 30 by default), one user of it VICTIM_EVENTS of them (100,000) spread over every
// day; its rollups are computed. Then, with another app ingesting all along, that user is deleted
// through the API. Figures: the time from the 202 to `done` (rollups recomputed), the other app's
// ingest rate during the deletion against its mean rate just before and just after, and the
// hot-path cost of the suppression check for an app without suppressions. They go into the `erasure` section of
// bench/results/latest.json (the rest of the file is kept). `--erasure-scale 0.25` shrinks the
// dataset (events and the user's share alike) for a busy machine.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';
import { ensure, makeTemporaryDir, stop as stopCluster } from '../../src/database/embedded-pg.mjs';
import { connect } from '../lib/db.mjs';
import { cli, freePort, ingestHeaders, makeTenant, startServer } from '../lib/processes.mjs';
import { saveResultsSection } from '../lib/report.mjs';

const DAY_MS = 86_400_000;
export const ERASURE_TARGETS = { secondsToDone: 60, ingestRatio: 0.8, hotPathMicrosPerEvent: 0.3 };
const INGEST_CLIENTS = 4;
const INGEST_BATCH = 100;
const BASELINE_SECONDS = 8;
const VICTIM = 'heavy-user-1';

function dayString(ms) {
  return new Date(ms).toISOString().slice(0, 10);
}

/** Fills DAYS daily partitions straight from SQL, with their ended-day B-trees as maintenance builds them. */
async function seed(url, { appId, victim, events, victimEvents, days, now, log }) {
  const client = await connect(url);
  try {
    await client.query(`SET synchronous_commit = off`);
    const today = Math.floor(now / DAY_MS) * DAY_MS;
    const perDay = Math.round(events / days);
    const victimPerDay = Math.round(victimEvents / days);
    for (let d = days - 1; d >= 0; d--) {
      const start = today - d * DAY_MS;
      const name = `events_p${dayString(start).replace(/-/g, '')}`;
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${name} PARTITION OF events
           FOR VALUES FROM ('${dayString(start)} 00:00:00+00') TO ('${dayString(start + DAY_MS)} 00:00:00+00')`,
      );
      const span = d === 0 ? Math.max(60_000, now - start) : DAY_MS;
      await client.query(
        `INSERT INTO ${name} (app_id, ts, received_at, event_time, event_name, event_id, anonymous_user_id,
                              session_id, is_test_mode, float_value, payload_json)
         SELECT $1, ts, ts, floor(extract(epoch FROM ts) * 1000)::bigint,
                (ARRAY['App.opened','Screen.viewed','Cart.added','Checkout.completed'])[1 + g % 4],
                $6 || '-' || g,
                CASE WHEN g % $4 = 0 AND g / $4 <= $5 THEN $2 ELSE 'u' || (g % 40000) END,
                's' || (g % 300000), false,
                CASE WHEN g % 5 = 0 THEN (g % 1000) / 10.0 END, '{"screen":"home"}'::json
           FROM (SELECT g, $3::timestamptz + ((g - 1)::float8 / $7) * ($8::float8 * interval '1 millisecond') AS ts
                   FROM generate_series(1, $7::int) AS g) AS s`,
        [
          appId,
          victim,
          new Date(start).toISOString(),
          Math.floor(perDay / victimPerDay),
          victimPerDay,
          name,
          perDay,
          span,
        ],
      );
      if (d > 0) {
        await client.query(
          `CREATE INDEX IF NOT EXISTS ${name}_user ON ${name}
             (app_id, anonymous_user_id, received_at DESC, id DESC) WHERE anonymous_user_id IS NOT NULL`,
        );
      }
      await client.query(`INSERT INTO rollup_dirty (app_id, day) VALUES ($1, $2::date)`, [
        appId,
        dayString(start),
      ]);
      log(`erasure: day ${days - d}/${days} seeded (${perDay} events)`);
    }
    await client.query(`ANALYZE events`);
    const { rows } = await client.query(
      `SELECT count(*)::int AS total, count(*) FILTER (WHERE anonymous_user_id = $2)::int AS victim
         FROM events WHERE app_id = $1`,
      [appId, victim],
    );
    return rows[0];
  } finally {
    await client.end();
  }
}

/** Other-app ingest from INGEST_CLIENTS clients until `until()` is true; returns events/s. */
async function ingestLoad(base, key, until) {
  let events = 0;
  const started = performance.now();
  const client = async (c) => {
    for (let seq = 0; !until(); seq++) {
      const batch = Array.from({ length: INGEST_BATCH }, (_, i) => ({
        eventName: 'Other.app',
        anonymousUserId: `o${(seq * INGEST_BATCH + i) % 5000}`,
        eventId: `o-${c}-${seq}-${i}-${started}`,
        floatValue: i,
      }));
      const res = await fetch(`${base}/api/ingest`, {
        method: 'POST',
        headers: ingestHeaders(key),
        body: JSON.stringify({ events: batch }),
      });
      const body = await res.json();
      if (res.status === 200) events += body.accepted;
    }
  };
  await Promise.all(Array.from({ length: INGEST_CLIENTS }, (_, c) => client(c)));
  return events / ((performance.now() - started) / 1000);
}

/**
 * The suppression check as ingest runs it for an app without suppressions: one matcher lookup
 * per request, one null test per event. Another app holds 1,000 suppressed users meanwhile.
 */
function hotPathCost(root) {
  const require = createRequire(import.meta.url);
  const { UserSuppressions } = require(path.join(root, 'dist/src/common/suppressions/user-suppressions.js'));
  const registry = new UserSuppressions();
  registry.setKey(Buffer.alloc(32, 7));
  registry.replaceApp(
    'other-app',
    Array.from({ length: 1000 }, (_, i) => i.toString(16).padStart(64, '0')),
  );
  const users = Array.from({ length: INGEST_BATCH }, (_, i) => `user-${i}`);
  // `fresh`: every event from a user not seen before (the worst case for an app with suppressions).
  const measure = (appId, requests, fresh = false) => {
    let hits = 0;
    const started = process.hrtime.bigint();
    for (let r = 0; r < requests; r++) {
      const match = registry.matcher(appId);
      for (let i = 0; i < users.length; i++)
        if (match && match(fresh ? `${users[i]}-${r}` : users[i])) hits++;
    }
    const ns = Number(process.hrtime.bigint() - started);
    return { microsPerEvent: ns / 1000 / (requests * users.length), hits };
  };
  measure('app-without', 100_000);
  const without = measure('app-without', 200_000);
  const withSomeFresh = measure('other-app', 2_000, true);
  measure('other-app', 1_000);
  const withSomeSeen = measure('other-app', 20_000);
  return {
    withoutSuppressionsMicrosPerEvent: without.microsPerEvent,
    withSuppressionsNewUserMicrosPerEvent: withSomeFresh.microsPerEvent,
    withSuppressionsSeenUserMicrosPerEvent: withSomeSeen.microsPerEvent,
  };
}

/** The server, two apps, the seeded dataset and its rollups. */
async function prepare({ dist, url, plan, now, log }) {
  const server = await startServer({ dist, databaseUrl: url });
  const big = await makeTenant(dist, url, 'erasure-big');
  const other = await makeTenant(dist, url, 'erasure-other');
  const created = await cli(dist, url, [
    'keys',
    'create-api',
    '--app',
    big.appId,
    '--scope',
    'privacy:write',
  ]);
  const seeded = await seed(url, { appId: big.appId, victim: VICTIM, ...plan, now, log });
  log(`erasure: ${seeded.total} events, ${seeded.victim} of the user; computing rollups`);
  const computeStarted = performance.now();
  await cli(dist, url, ['rollups', 'compute', '--app', big.appId]);
  const rollupComputeSeconds = (performance.now() - computeStarted) / 1000;
  return { server, big, other, privacyKey: created.key, seeded, rollupComputeSeconds };
}

/** Deletes the user through the API while the other app ingests; returns the ended deletion and the rates. */
async function timeDeletion({ server, big, other, privacyKey }, log) {
  const baselineEnd = performance.now() + BASELINE_SECONDS * 1000;
  const baselineRate = await ingestLoad(
    server.baseUrl,
    other.ingestKey,
    () => performance.now() > baselineEnd,
  );
  log(`erasure: other app's ingest without a deletion: ${baselineRate.toFixed(0)} events/s`);
  let ended = false;
  const during = ingestLoad(server.baseUrl, other.ingestKey, () => ended);
  const auth = { authorization: `Bearer ${privacyKey}` };
  const res = await fetch(`${server.baseUrl}/api/v1/deletions`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ appId: big.appId, anonymousUserIds: [VICTIM] }),
  });
  const accepted = performance.now();
  const { id } = await res.json();
  let deletion;
  for (;;) {
    deletion = await (await fetch(`${server.baseUrl}/api/v1/deletions/${id}`, { headers: auth })).json();
    if (deletion.status === 'done' || deletion.status === 'failed') break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const secondsToDone = (performance.now() - accepted) / 1000;
  ended = true;
  const duringRate = await during;
  // The box may be shared: the rate without a deletion is the mean of the windows before and after.
  const afterEnd = performance.now() + BASELINE_SECONDS * 1000;
  const afterRate = await ingestLoad(server.baseUrl, other.ingestKey, () => performance.now() > afterEnd);
  log(
    `erasure: done in ${secondsToDone.toFixed(1)} s; other app's ingest meanwhile ${duringRate.toFixed(0)} events/s`,
  );
  return { deletion, secondsToDone, beforeRate: baselineRate, afterRate, duringRate };
}

export async function erasureBenchmarkMain({ root, log, git, scale = 1 }) {
  const dir = await makeTemporaryDir('bench-erasure');
  const { url } = await ensure(dir, await freePort());
  const plan = { events: Math.round(2_000_000 * scale), victimEvents: Math.round(100_000 * scale), days: 30 };
  let setup;
  try {
    setup = await prepare({ dist: path.join(root, 'dist'), url, plan, now: Date.now(), log });
    const { deletion, secondsToDone, beforeRate, afterRate, duringRate } = await timeDeletion(setup, log);
    const baselineRate = (beforeRate + afterRate) / 2;
    const hot = hotPathCost(root);
    const ratio = duringRate / baselineRate;
    const result = {
      timestamp: new Date().toISOString(),
      commit: git(['rev-parse', 'HEAD']),
      scale,
      dataset: { ...plan, stored: setup.seeded.total, userEvents: setup.seeded.victim },
      rollupComputeSeconds: setup.rollupComputeSeconds,
      deletion: {
        status: deletion.status,
        eventsDeleted: deletion.eventsDeleted,
        daysRecomputed: deletion.daysRecomputed,
        secondsToDone,
        includesSuppressionSettleSeconds: 1,
      },
      otherAppIngest: {
        clients: INGEST_CLIENTS,
        batch: INGEST_BATCH,
        beforeEventsPerSecond: beforeRate,
        afterEventsPerSecond: afterRate,
        baselineEventsPerSecond: baselineRate,
        duringDeletionEventsPerSecond: duringRate,
        ratio,
      },
      hotPath: hot,
      targets: ERASURE_TARGETS,
      met: {
        secondsToDone: secondsToDone <= ERASURE_TARGETS.secondsToDone,
        ingestRatio: ratio >= ERASURE_TARGETS.ingestRatio,
        hotPath: hot.withoutSuppressionsMicrosPerEvent <= ERASURE_TARGETS.hotPathMicrosPerEvent,
      },
    };
    log(`erasure: ${JSON.stringify(result)}`);
    saveResultsSection(root, 'erasure', result);
    return deletion.status === 'done' && setup.seeded.victim === deletion.eventsDeleted ? 0 : 1;
  } finally {
    await setup?.server.stop().catch(() => undefined);
    await stopCluster(dir).catch(() => undefined);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
