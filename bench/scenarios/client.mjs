// Client figures: the cost of TallyClient.track() per event, and end-to-end events/s through
// TallyClient against the raw-HTTP ingest figure of the same run. Uses the built package
// (packages/client/dist, made by `npm run build`).
import path from 'node:path';
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

/** Nanoseconds per track() call, with no request sent (nothing reaches flushAt or the timer). */
async function trackCost(TallyClient, n) {
  const client = new TallyClient({
    endpoint: 'http://127.0.0.1:9',
    ingestKey: 'tly_live_bench',
    flushAt: 10 * n,
    flushIntervalMs: 3_600_000,
    maxQueueEvents: 10 * n,
    maxQueueBytes: 1 << 30,
  });
  const events = Array.from({ length: n }, (_, i) => event(i));
  for (let i = 0; i < Math.min(n, 20_000); i++) client.track(events[i]); // warm-up
  const t0 = performance.now();
  for (let i = 0; i < n; i++) client.track(events[i]);
  const ns = ((performance.now() - t0) * 1e6) / n;
  return ns;
}

/**
 * Runs both figures. `ingestEventsPerSec` is the same run's raw-HTTP figure (100-event batches,
 * 64 connections), the ratio's denominator.
 */
export async function clientScenario({ baseUrl, ingestKey, ingestEventsPerSec, quick, log }) {
  const { TallyClient } = await loadClient();
  const trackNsPerEvent = await trackCost(TallyClient, quick ? 50_000 : 300_000);
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
