// The HTTP ceiling: a bare node:http server taking the same batches, for comparison.
import path from 'node:path';
import { batchTemplate } from '../lib/events.mjs';
import { runLoad } from '../lib/load.mjs';
import { startBareServer } from '../lib/processes.mjs';
import { BENCH, PLAN, log, check, ingestHeaders } from '../lib/common.mjs';

export async function httpCeilingPhase(results) {
  const server = await startBareServer(path.join(BENCH, 'http-ceiling.mjs'));
  try {
    const templates = Array.from({ length: 32 }, (_, i) => batchTemplate(200 + i, 100));
    // The bare server does not deduplicate, so fixed bodies are fair, and cheapest for the client.
    const body = templates.map((t, i) => Buffer.from(t.render(`h${i}`)));
    const out = {};
    const warm = await runLoad({
      url: `${server.baseUrl}/api/ingest`,
      method: 'POST',
      headers: ingestHeaders('x'),
      body,
      connections: 16,
      amount: PLAN.warmupRequests * 2,
      count: true,
    });
    for (const connections of [16, 64]) {
      const r = await runLoad({
        url: `${server.baseUrl}/api/ingest`,
        method: 'POST',
        headers: ingestHeaders('x'),
        body,
        connections,
        amount: Math.max(
          connections * 3,
          Math.min(Math.round(warm.requestsPerSec * PLAN.loadSeconds * 0.6), 40_000),
        ),
        count: true,
        maxSeconds: PLAN.maxLoadSeconds,
      });
      check(
        `http ceiling c${connections}: no errors`,
        r.errors + r.timeouts + r.non2xx === 0 && !r.stoppedEarly,
        `errors ${r.errors}, timeouts ${r.timeouts}, non-2xx ${r.non2xx}`,
      );
      out[`c${connections}`] = r;
      log(`http ceiling c${connections}: ${Math.round(r.eventsPerSec)} events/s`);
    }
    results.httpCeiling = out;
  } finally {
    await server.stop();
  }
}
