// The server's CPU per ingest request, split into what a request costs whatever it carries and
// what each event in it adds: loads of 1-, 10-, 100- and 1,000-event batches, the server's CPU
// time per request of each, and a least-squares line through them (CPU per request = fixed +
// per event × events). At 100-event batches the fixed part is paid once per 100 events, so it
// says how much of the server's CPU per event is per-request work (framework, middleware,
// guards, body reading, the answer) and how much is per-event work (parsing, validation,
// statement building).
//
//   npm run build && node bench/scenarios/request-cost.mjs [--dist dist] [--connections 16] > out.json
//   node bench/scenarios/request-cost.mjs --profile 1    # only 1-event loads, under --cpu-prof;
//                                                        # then profile-layers.mjs on the file
//
// Uses the benchmark's cluster (bench/.cache/pg) with a database of its own, and the built
// server as `npm start` runs it. Each load is sized to last about 5 s on the reference machine;
// the first, discarded, warms the server up.
import { parseArgs } from 'node:util';
import path from 'node:path';
import { batchTemplate } from '../lib/events.mjs';
import { runLoad } from '../lib/load.mjs';
import { cpuSecondsOf, freePort, ingestHeaders, makeTenant, startServer } from '../lib/processes.mjs';
import { recreateDatabase, withDatabase } from '../lib/db.mjs';
import { ensure } from '../../src/database/embedded-pg.mjs';

const { values: flags } = parseArgs({
  options: {
    dist: { type: 'string', default: 'dist' },
    connections: { type: 'string', default: '16' },
    rounds: { type: 'string', default: '3' },
    profile: { type: 'string' },
  },
});
const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');
const DIST = path.resolve(ROOT, flags.dist);
const CONNECTIONS = Number(flags.connections);
/** Batch size → requests per load (about 5 s each on the reference machine). */
const LOADS = [
  [1, 20_000],
  [10, 12_000],
  [100, 1_500],
  [1000, 150],
];
const log = (msg) => console.error(`[request-cost] ${msg}`);

/** Least squares of y = a + b·x. */
function fit(points) {
  const n = points.length;
  const mx = points.reduce((s, p) => s + p.x, 0) / n;
  const my = points.reduce((s, p) => s + p.y, 0) / n;
  const sxy = points.reduce((s, p) => s + (p.x - mx) * (p.y - my), 0);
  const sxx = points.reduce((s, p) => s + (p.x - mx) ** 2, 0);
  const b = sxy / sxx;
  return { fixedUs: my - b * mx, perEventUs: b };
}

const cluster = await ensure(path.join(ROOT, 'bench', '.cache', 'pg'), await freePort());
const url = withDatabase(cluster.url, 'bench_request_cost');
await recreateDatabase(cluster.url, 'bench_request_cost');
const profileDir = path.join(ROOT, 'bench', '.cache', 'profiles');
const server = await startServer({
  dist: DIST,
  databaseUrl: url,
  nodeArgs: flags.profile ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [],
});
const rounds = [];
try {
  const tenant = await makeTenant(DIST, url, 'request-cost');
  const headers = ingestHeaders(tenant.ingestKey);
  const measure = async (batch, amount, tag) => {
    const templates = Array.from({ length: 8 }, (_, i) => batchTemplate(900 + i, batch));
    const runId = `${tag}-${Date.now().toString(36)}`;
    const before = cpuSecondsOf(server.pid);
    const result = await runLoad({
      url: `${server.baseUrl}/api/ingest`,
      method: 'POST',
      headers,
      body: (i) => templates[i % templates.length].render(`${runId}.${i.toString(36)}`),
      connections: CONNECTIONS,
      amount,
      count: true,
      maxSeconds: 60,
    });
    const seconds = cpuSecondsOf(server.pid) - before;
    if (result.errors || result.non2xx || result.totals.accepted !== amount * batch) {
      const { errors, non2xx, totals } = result;
      throw new Error(`batch ${batch}: ${JSON.stringify({ errors, non2xx, accepted: totals.accepted })}`);
    }
    return { batch, requests: amount, usPerRequest: (seconds * 1e6) / amount };
  };
  await measure(100, 600, 'warmup');
  if (flags.profile) {
    const batch = Number(flags.profile);
    const [, amount] = LOADS.find(([b]) => b === batch) ?? [batch, 2000];
    for (let i = 0; i < 3; i++) log(JSON.stringify(await measure(batch, amount, `profile${i}`)));
    log(`profile in ${path.relative(ROOT, profileDir)} (written when the server stops)`);
  }
  for (let round = 1; !flags.profile && round <= Number(flags.rounds); round++) {
    const points = [];
    for (const [batch, amount] of LOADS) points.push(await measure(batch, amount, `r${round}b${batch}`));
    const line = fit(points.map((p) => ({ x: p.batch, y: p.usPerRequest })));
    rounds.push({ round, points, ...line });
    log(
      `round ${round}: ` +
        points.map((p) => `${p.batch}/batch ${p.usPerRequest.toFixed(0)} µs/request`).join(', ') +
        `; fixed ${line.fixedUs.toFixed(0)} µs per request + ${line.perEventUs.toFixed(2)} µs per event`,
    );
  }
} finally {
  await server.stop();
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fixedUs = median(rounds.map((r) => r.fixedUs));
const perEventUs = median(rounds.map((r) => r.perEventUs));
console.log(
  JSON.stringify(
    {
      dist: path.relative(ROOT, DIST) || DIST,
      connections: CONNECTIONS,
      rounds,
      median: {
        fixedUsPerRequest: Math.round(fixedUs),
        perEventUs: Math.round(perEventUs * 100) / 100,
        // The fixed part's share of the server's CPU per event at 100-event batches.
        fixedShareAt100: Math.round((fixedUs / (fixedUs + 100 * perEventUs)) * 100) / 100,
      },
    },
    null,
    2,
  ),
);
