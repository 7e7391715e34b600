// Soak: steady ingest load for a set time against the built server on a private embedded
// PostgreSQL, then a report of events acknowledged versus stored, p50/p99 latency per interval
// and the server's RSS per interval. Memory must level off, not keep growing.
//
// Usage: npm run soak -- [--minutes 10] [--rate 5000] [--clients 8] [--batch 100]
//   --rate is the target in events per second across all clients (paced, not flat out),
//   so that latency and memory are measured under the same load from start to end.
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import {
  assertBuilt,
  freePort,
  ingest,
  makeTenant,
  percentile,
  rssOf,
  sleep,
  startDatabase,
  startServer,
} from '../test/reliability/harness.mjs';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '10' },
    rate: { type: 'string', default: '5000' },
    clients: { type: 'string', default: '8' },
    batch: { type: 'string', default: '100' },
    interval: { type: 'string' },
  },
});
const DURATION_MS = Math.round(Number(values.minutes) * 60_000);
const RATE = Number(values.rate);
const CLIENTS = Number(values.clients);
const BATCH = Number(values.batch);
// One report line per minute; a short smoke run still gets several lines.
const INTERVAL_MS = values.interval
  ? Number(values.interval) * 1000
  : Math.min(60_000, Math.max(5_000, DURATION_MS / 6));
if (!(DURATION_MS > 0 && RATE > 0 && CLIENTS > 0 && BATCH > 0 && INTERVAL_MS > 0)) {
  process.stderr.write(
    'soak: --minutes, --rate, --clients, --batch and --interval must be positive numbers\n',
  );
  process.exit(2);
}

const payload = { plan: 'pro', screen: 'checkout', step: 3, experiment: 'b', ok: true };
function makeBatch(client, seq) {
  const now = Date.now();
  return Array.from({ length: BATCH }, (_, i) => ({
    eventName: i % 3 === 0 ? 'Checkout.completed' : 'Screen.viewed',
    eventId: `soak-${client}-${seq}-${i}-${randomUUID().slice(0, 8)}`,
    eventTime: now,
    anonymousUserId: `user-${(seq * BATCH + i) % 5000}`,
    sessionId: `s-${client}-${Math.floor(seq / 50)}`,
    platform: 'ios',
    appVersion: '4.2.0',
    floatValue: (i % 50) + 0.99,
    payload,
  }));
}

function newInterval(index) {
  return { index, latencies: [], requests: 0, acked: 0, errors: 0, non200: {}, rss: null };
}

async function main() {
  await assertBuilt();
  const db = await startDatabase('soak');
  let server;
  try {
    const tenant = await makeTenant(db.url, 'soak');
    server = await startServer({
      databaseUrl: db.url,
      port: await freePort(),
      env: { ROLLUP_INTERVAL_SECONDS: '60' },
    });
    const intervals = [newInterval(0)];
    const startedAt = Date.now();
    const endAt = startedAt + DURATION_MS;
    const current = () => intervals[intervals.length - 1];
    let acknowledged = 0;
    let sent = 0;

    const sampler = setInterval(() => {
      const done = current();
      done.rss = rssOf(server.pid);
      report(done);
      intervals.push(newInterval(done.index + 1));
    }, INTERVAL_MS);

    // Each client paces itself to its share of the target rate.
    const perClientGapMs = (CLIENTS * BATCH * 1000) / RATE;
    const client = async (c) => {
      let next = Date.now() + Math.random() * perClientGapMs;
      for (let seq = 0; Date.now() < endAt; seq++) {
        const wait = next - Date.now();
        if (wait > 0) await sleep(wait);
        next += perClientGapMs;
        const bucket = current();
        const res = await ingest(server.base, tenant.ingestKey, makeBatch(c, seq), 30_000);
        sent += BATCH;
        bucket.requests++;
        bucket.latencies.push(res.ms);
        if (res.status === 200) {
          bucket.acked += res.body.accepted;
          acknowledged += res.body.accepted;
        } else if (res.error) {
          bucket.errors++;
        } else {
          bucket.non200[res.status] = (bucket.non200[res.status] ?? 0) + 1;
        }
      }
    };

    process.stdout.write(
      `soak: ${values.minutes} min, target ${RATE} events/s, ${CLIENTS} clients, batches of ${BATCH}, ` +
        `report every ${Math.round(INTERVAL_MS / 1000)} s\n`,
    );
    process.stdout.write('interval  requests  events/s  p50_ms  p99_ms  max_ms  errors  rss_mb\n');
    await Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c)));
    clearInterval(sampler);
    const last = current();
    last.rss = rssOf(server.pid);
    if (last.requests > 0) report(last);

    const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM events WHERE app_id = $1', [
      tenant.appId,
    ]);
    const stored = rows[0].n;
    const all = intervals.flatMap((i) => i.latencies).sort((x, y) => x - y);
    const rss = intervals.map((i) => i.rss).filter((r) => r !== null);
    // Growth of RSS over the second half of the run: a leak keeps climbing, a warm heap levels off.
    const half = rss.slice(Math.floor(rss.length / 2));
    const growthMb = half.length >= 2 ? (half[half.length - 1] - half[0]) / 1048576 : 0;
    const seconds = (Date.now() - startedAt) / 1000;
    const lost = acknowledged - stored;
    process.stdout.write(
      `soak: minutes=${values.minutes} sent=${sent} acknowledged=${acknowledged} stored=${stored} lost=${lost} ` +
        `events_per_s=${Math.round(acknowledged / seconds)} p50_ms=${percentile(all, 50).toFixed(1)} ` +
        `p99_ms=${percentile(all, 99).toFixed(1)} rss_first_mb=${(rss[0] / 1048576).toFixed(0)} ` +
        `rss_last_mb=${(rss[rss.length - 1] / 1048576).toFixed(0)} rss_growth_second_half_mb=${growthMb.toFixed(1)}\n`,
    );
    const ok = lost === 0 && stored === acknowledged && server.isAlive();
    process.stdout.write(ok ? 'soak: ok\n' : 'soak: FAILED (events lost or server died)\n');
    return ok ? 0 : 1;
  } finally {
    await server?.kill('SIGTERM');
    await db.destroy();
  }
}

function report(i) {
  const sorted = [...i.latencies].sort((x, y) => x - y);
  const failures = i.errors + Object.values(i.non200).reduce((x, y) => x + y, 0);
  const codes = Object.keys(i.non200).length ? ` ${JSON.stringify(i.non200)}` : '';
  process.stdout.write(
    `${String(i.index + 1).padStart(8)}  ${String(i.requests).padStart(8)}  ` +
      `${String(Math.round(i.acked / (INTERVAL_MS / 1000))).padStart(8)}  ` +
      `${percentile(sorted, 50).toFixed(1).padStart(6)}  ${percentile(sorted, 99).toFixed(1).padStart(6)}  ` +
      `${(sorted[sorted.length - 1] ?? NaN).toFixed(1).padStart(6)}  ${String(failures).padStart(6)}  ` +
      `${i.rss === null ? '?' : (i.rss / 1048576).toFixed(0).padStart(6)}${codes}\n`,
  );
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`soak aborted: ${err instanceof Error ? (err.stack ?? err.message) : err}\n`);
    process.exit(1);
  },
);
