// Client figures: the cost of TallyClient.track() per event, and end-to-end events/s through
// TallyClient against the raw-HTTP ingest figure of the same run. Uses the built package
// (packages/client/dist, made by `npm run build`).
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

async function loadClient() {
  return import(pathToFileURL(path.join(ROOT, 'packages/client/dist/index.js')).href);
}

const event = (i) => ({
  eventName: 'Bench.client',
  anonymousUserId: `u-${i % 1000}`,
  floatValue: i * 0.5,
  platform: 'ios',
  payload: { plan: 'pro', step: i % 7, ok: true },
});

/**
 * Nanoseconds per track() call in a steady state: chunks of 1,000 calls (one default batch) are
 * timed, and between chunks the queue is drained into a fetch that answers at once (not timed),
 * as a running client drains it. Queueing hundreds of thousands of events without sending any
 * would time the garbage collector's work on an ever larger queue instead.
 */
async function trackCost(TallyClient, n) {
  const answer = (body) => {
    const received = JSON.parse(body).events.length;
    return new Response(
      JSON.stringify({
        received,
        accepted: received,
        duplicates: 0,
        rejected: 0,
        metered: received,
        errors: [],
        warnings: [],
      }),
      { status: 200, headers: { 'content-type': 'application/json' } },
    );
  };
  const client = new TallyClient({
    endpoint: 'http://127.0.0.1:9',
    ingestKey: 'tly_live_bench',
    flushAt: 1000,
    flushIntervalMs: 3_600_000,
    gzipAboveBytes: Infinity,
    // Answered on a later turn, so that the fake server's work stays out of the timed loop.
    fetch: async (_url, init) => {
      await new Promise((resolve) => setImmediate(resolve));
      return answer(init.body);
    },
  });
  const chunk = 1000;
  const events = Array.from({ length: chunk }, (_, i) => event(i));
  let timed = 0;
  for (let done = -20_000; done < n; done += chunk) {
    const t0 = performance.now();
    for (let i = 0; i < chunk; i++) client.track(events[i]);
    if (done >= 0) timed += performance.now() - t0; // the first 20,000 warm up
    await client.flush();
  }
  await client.shutdown({ timeoutMs: 1000 });
  return (timed * 1e6) / n;
}

/**
 * track() is timed in a Node process of its own, as in an application: the benchmark's process
 * holds the load generator's state, whose garbage collection would be charged to the client.
 */
function trackCostInOwnProcess(n) {
  const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url), '--track', String(n)], {
    encoding: 'utf8',
  });
  return Number(out.trim());
}

/**
 * Runs both figures. `ingestEventsPerSec` is the same run's raw-HTTP figure (100-event batches,
 * 64 connections), the ratio's denominator.
 */
export async function clientScenario({ baseUrl, ingestKey, ingestEventsPerSec, quick, log }) {
  const { TallyClient } = await loadClient();
  const trackNsPerEvent = trackCostInOwnProcess(quick ? 50_000 : 300_000);
  log(`client: track() ${trackNsPerEvent.toFixed(0)} ns per event`);

  const n = quick ? 20_000 : 200_000;
  let errors = 0;
  const client = new TallyClient({
    endpoint: baseUrl,
    ingestKey,
    flushAt: 500,
    concurrency: 8,
    gzipAboveBytes: Infinity,
    maxQueueEvents: n,
    onError: () => errors++,
  });
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    client.track(event(i));
    // Let requests start while tracking, as an application would.
    if (i % 5000 === 4999) await new Promise((r) => setImmediate(r));
  }
  await client.flush();
  const seconds = (performance.now() - t0) / 1000;
  const stats = client.stats();
  await client.shutdown({ timeoutMs: 10_000 });
  const eventsPerSec = n / seconds;
  const out = {
    trackNsPerEvent,
    events: n,
    eventsPerSec,
    vsRawIngest: ingestEventsPerSec ? eventsPerSec / ingestEventsPerSec : null,
    stats,
    errors,
  };
  log(
    `client: ${Math.round(eventsPerSec)} events/s end to end (${(out.vsRawIngest ?? 0).toFixed(2)} of raw HTTP), ` +
      `${stats.batches} requests, ${stats.retries} retries`,
  );
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] === '--track') {
  const { TallyClient } = await loadClient();
  console.log(String(await trackCost(TallyClient, Number(process.argv[3]))));
}
