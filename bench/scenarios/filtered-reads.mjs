/* global fetch */
// Filtered reads while ingest runs: the sessionId, anonymousUserId and testMode=true filters of
// GET /api/v1/events on an app with `dayEvents` events today (2 million in the full run), in the
// partition that ingest is writing, while ingest is offered `share` (80 %) of the peak rate that
// the run measured at 64 connections. Called from the reads phase of bench/run.mjs.
//
// The day is generated once per UTC day and kept in the reads database (bench_meta 'filters').
import autocannon from 'autocannon';
import { batchTemplate } from '../lib/events.mjs';

const VERSION = 1;

async function ensureFilterDay(db, { dayEvents, now, log, createApp }) {
  const day = new Date(now).toISOString().slice(0, 10);
  const { rows } = await db.query(`SELECT value FROM bench_meta WHERE name = 'filters'`);
  const have = rows[0]?.value;
  if (have && have.version === VERSION && have.day === day && have.dayEvents === dayEvents) return have;
  const appId = await createApp();
  const dayStart = Date.parse(`${day}T00:00:00Z`);
  const span = Math.max(60_000, now - dayStart - 60_000);
  const t0 = Date.now();
  // Through the partitioned table and its indexes, as ingest would have written them; in
  // statements of 200,000 rows so that each stays short.
  for (let done = 0; done < dayEvents; done += 200_000) {
    await db.query(
      `INSERT INTO events (app_id, ts, received_at, event_time, event_name, event_id, anonymous_user_id,
                           session_id, is_test_mode, platform, payload)
       SELECT $1::uuid, ts, ts, floor(extract(epoch FROM ts) * 1000)::bigint,
              (ARRAY['App.opened', 'Screen.viewed', 'Button.tapped', 'Purchase.completed'])[1 + floor(random() * 4)::int],
              'f.' || g, 'u' || floor(random() * 40000)::int, 's' || floor(random() * 300000)::int,
              random() < 0.02, (ARRAY['ios', 'android', 'web'])[1 + floor(random() * 3)::int],
              jsonb_build_object('screen', 'home', 'step', floor(random() * 12)::int)
         FROM (SELECT g, $2::timestamptz + (g::float8 / $4) * ($5::float8 * interval '1 millisecond') AS ts
                 FROM generate_series($3::int + 1, least($3::int + 200000, $4::int)) AS g) s`,
      [appId, new Date(dayStart).toISOString(), done, dayEvents, span],
    );
    log(`filters dataset: ${Math.min(done + 200_000, dayEvents)} of ${dayEvents} events today`);
  }
  await db.query('ANALYZE events');
  const meta = { version: VERSION, day, dayEvents, appId, generationSeconds: (Date.now() - t0) / 1000 };
  await db.query(
    `INSERT INTO bench_meta (name, value) VALUES ('filters', $1)
     ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value`,
    [meta],
  );
  return meta;
}

/**
 * The server adds the current day's lookup index at start when the day's partition lacks it (a
 * dataset made before the index existed), and summarizes the ranges the dataset filled within
 * seconds; measure once both are done, as users would see the reads.
 */
async function awaitLookupIndex(db, log) {
  const name = `events_p${new Date().toISOString().slice(0, 10).replace(/-/g, '')}_lookup`;
  for (let i = 0; i < 600; i++) {
    const { rows: valid } = await db.query(
      `SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = $1 AND i.indisvalid`,
      [name],
    );
    if (valid.length) {
      // The server's own pass summarizes every few seconds; one more here waits for it to end.
      await db.query(`SELECT brin_summarize_new_values($1::regclass)`, [name]);
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  log(`filtered reads: ${name} was not built within 60 s`);
  throw new Error(`${name} was not built within 60 s`);
}

function latency(times) {
  const sorted = [...times].sort((a, b) => a - b);
  const at = (p) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
  const r = (v) => Math.round(v * 10) / 10;
  return { n: sorted.length, p50: r(at(50)), p99: r(at(99)), max: r(sorted[sorted.length - 1]) };
}

/** Sequential GETs of each url in turn until `until()` says stop; latency per url. */
async function readLoop(urls, headers, until, minPerUrl) {
  const times = Object.fromEntries(Object.keys(urls).map((k) => [k, []]));
  const errors = Object.fromEntries(Object.keys(urls).map((k) => [k, 0]));
  const rows = {};
  for (let i = 0; ; i++) {
    const done = Object.values(times).every((t) => t.length >= minPerUrl);
    if (done && until()) break;
    for (const [k, url] of Object.entries(urls)) {
      const t0 = process.hrtime.bigint();
      const res = await fetch(url, { headers });
      const body = res.ok ? await res.json() : null;
      times[k].push(Number(process.hrtime.bigint() - t0) / 1e6);
      if (!res.ok) errors[k]++;
      else rows[k] = body.length;
    }
  }
  return Object.fromEntries(
    Object.keys(urls).map((k) => [k, { ...latency(times[k]), errors: errors[k], rows: rows[k] ?? 0 }]),
  );
}

export async function filteredReadsUnderIngest({
  baseUrl,
  db,
  createApp,
  createKeys,
  peakEventsPerSec,
  dayEvents,
  seconds,
  minReads,
  share = 0.8,
  log,
}) {
  const meta = await ensureFilterDay(db, { dayEvents, now: Date.now(), log, createApp });
  const { appId } = meta;
  await awaitLookupIndex(db, log);
  const { ingestKey, apiKey } = await createKeys(appId);
  const pick = async (column) =>
    (
      await db.query(
        `SELECT ${column} AS v FROM events WHERE app_id = $1 AND ts >= now() - interval '1 hour'
            AND ${column} IS NOT NULL LIMIT 1`,
        [appId],
      )
    ).rows[0]?.v ??
    (await db.query(`SELECT ${column} AS v FROM events WHERE app_id = $1 LIMIT 1`, [appId])).rows[0].v;
  const base = `${baseUrl}/api/v1/events?appId=${appId}&limit=1000`;
  const urls = {
    sessionId: `${base}&sessionId=${encodeURIComponent(await pick('session_id'))}`,
    anonymousUserId: `${base}&anonymousUserId=${encodeURIComponent(await pick('anonymous_user_id'))}`,
    testMode: `${base}&testMode=true`,
  };
  const headers = { authorization: `Bearer ${apiKey}` };
  await readLoop(urls, headers, () => true, 3); // warm the plans and the pages

  const quiet = await readLoop(urls, headers, () => true, minReads);

  // Ingest offered at `share` of the peak, in 100-event batches from 64 connections, as many as
  // the peak was measured with: fewer would cap what ingest can achieve by themselves once its
  // latency rises (Little's law), and that cap would be counted against the reads.
  const offeredEventsPerSec = Math.round(peakEventsPerSec * share);
  const rate = Math.max(1, Math.round(offeredEventsPerSec / 100));
  const templates = Array.from({ length: 16 }, (_, i) => batchTemplate(800 + i, 100));
  const runId = `fr-${Date.now().toString(36)}`;
  let sent = 0;
  let accepted = 0;
  const instance = autocannon({
    url: `${baseUrl}/api/ingest`,
    method: 'POST',
    headers: { authorization: `Bearer ${ingestKey}`, 'content-type': 'application/json' },
    connections: 64,
    overallRate: rate,
    amount: rate * seconds,
    timeout: 30,
    requests: [
      {
        setupRequest: (req) => ({ ...req, body: templates[sent % 16].render(`${runId}.${sent++}`) }),
        onResponse: (status, text) => {
          if (status === 200) accepted += JSON.parse(text).accepted;
        },
      },
    ],
  });
  let ingestDone = false;
  let elapsed = 0;
  const t0 = process.hrtime.bigint();
  const finished = instance.then((r) => {
    ingestDone = true;
    elapsed = Number(process.hrtime.bigint() - t0) / 1e9;
    return r;
  });
  const underIngest = await readLoop(urls, headers, () => ingestDone, minReads);
  const ingest = await finished;
  const achieved = accepted / elapsed;
  return {
    appId,
    dayEvents: meta.dayEvents,
    datasetGenerationSeconds: meta.generationSeconds,
    quiet,
    underIngest,
    ingest: {
      peakEventsPerSec: Math.round(peakEventsPerSec),
      offeredEventsPerSec,
      achievedEventsPerSec: Math.round(achieved),
      shareOfPeak: Math.round((achieved / peakEventsPerSec) * 100) / 100,
      // What the reads cost ingest, as a share of its peak: "ingest may lose at most 10 % of its
      // peak while they run".
      lossOfPeak: Math.round(((offeredEventsPerSec - achieved) / peakEventsPerSec) * 1000) / 1000,
      p50: ingest.latency.p50,
      p99: ingest.latency.p99,
      errors: ingest.errors + ingest.timeouts + ingest.non2xx,
    },
  };
}

/** Correctness only: every read and every ingest request answered without error. */
export function checkFilteredReads(r, check, log) {
  for (const phase of ['quiet', 'underIngest']) {
    for (const [k, v] of Object.entries(r[phase])) {
      check(
        `filtered reads ${phase} ${k}: no errors`,
        v.errors === 0 && v.n > 0,
        `${v.errors} errors in ${v.n}`,
      );
      log(`filtered reads ${phase} ${k}: p50 ${v.p50} ms, p99 ${v.p99} ms, ${v.rows} rows`);
    }
  }
  check('filtered reads: ingest alongside had no errors', r.ingest.errors === 0, `${r.ingest.errors} errors`);
  log(
    `filtered reads: ingest offered ${r.ingest.offeredEventsPerSec} events/s, achieved ${r.ingest.achievedEventsPerSec} ` +
      `(${Math.round(r.ingest.shareOfPeak * 100)} % of the peak ${r.ingest.peakEventsPerSec}; ` +
      `lost ${Math.round(r.ingest.lossOfPeak * 1000) / 10} % of the peak), p99 ${r.ingest.p99} ms`,
  );
}
