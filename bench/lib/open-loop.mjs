// Open-loop load: requests leave on a fixed schedule, whatever the server answers, and each
// latency counts from the moment its request was due, not from when it was written. A closed loop
// (autocannon) waits for an answer before the next request, so a slow server slows its own
// arrivals and the waiting that users would see is never measured (coordinated omission).
import http from 'node:http';
import { performance } from 'node:perf_hooks';

/** Nearest-rank percentile of an ascending list; null when empty. */
export function percentileOf(sorted, p) {
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

const round2 = (v) => (v === null ? null : Math.round(v * 100) / 100);

/** p50, p99, p99.9 and max of a list of durations in ms. */
export function tailOf(values) {
  const sorted = Float64Array.from(values).sort();
  return {
    n: sorted.length,
    p50: round2(percentileOf(sorted, 50)),
    p99: round2(percentileOf(sorted, 99)),
    p999: round2(percentileOf(sorted, 99.9)),
    max: round2(sorted.length ? sorted[sorted.length - 1] : null),
  };
}

/**
 * Sends `body(i)` as request i at `start + i / ratePerSec` for `seconds`, on a keep-alive agent
 * with sockets enough that no request waits for one. Then waits up to `drainMs` for the last
 * answers; a request still unanswered then counts with the time it has waited so far (a lower
 * bound) and in `unanswered`.
 *
 * `onAnswer(status, text)` sees each answer's body (for counting what ingest accepted).
 * Resolves with the latency of every answer by status, from its intended send time.
 */
export async function openLoop({ url, headers, body, ratePerSec, seconds, drainMs = 30_000, onAnswer }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4096, maxFreeSockets: 4096 });
  const total = Math.max(1, Math.round(ratePerSec * seconds));
  const intervalMs = 1000 / ratePerSec;
  const byStatus = new Map();
  const pending = new Set();
  const sendLags = [];
  let maxInFlight = 0;
  let answered = 0;
  let errors = 0;
  let lastSentAt = 0;
  let sent = 0;
  const start = performance.now() + 20;

  // The slowest answer of the requests due in each second: a stall shows as a few bad seconds,
  // arrivals past capacity as a climb.
  const worstBySecond = [];
  const record = (status, ms, due) => {
    if (!byStatus.has(status)) byStatus.set(status, []);
    byStatus.get(status).push(ms);
    const second = Math.max(0, Math.floor((due - start) / 1000));
    worstBySecond[second] = Math.max(worstBySecond[second] ?? 0, Math.round(ms));
  };
  const send = (i) => {
    const due = start + i * intervalMs;
    const request = { due };
    pending.add(request);
    const finish = (status, text) => {
      if (!pending.delete(request)) return;
      answered++;
      record(status, performance.now() - due, due);
      if (status !== 0) onAnswer?.(status, text);
      else errors++;
    };
    const req = http.request(url, { method: 'POST', agent, headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => finish(res.statusCode, Buffer.concat(chunks).toString('utf8')));
      res.on('error', () => finish(0));
    });
    req.on('error', () => finish(0));
    req.end(body(i));
    sent++;
    lastSentAt = performance.now();
    sendLags.push(lastSentAt - due);
    if (pending.size > maxInFlight) maxInFlight = pending.size;
  };

  await new Promise((resolve) => {
    let next = 0;
    // Every request that is due goes now; then sleep until the next one is due.
    const pump = () => {
      const now = performance.now();
      while (next < total && start + next * intervalMs <= now) send(next++);
      if (next >= total) return resolve();
      setTimeout(pump, Math.max(0, start + next * intervalMs - performance.now()));
    };
    setTimeout(pump, Math.max(0, start - performance.now()));
  });
  const sendSeconds = (lastSentAt - start) / 1000;
  const drainUntil = performance.now() + drainMs;
  while (pending.size && performance.now() < drainUntil) await new Promise((r) => setTimeout(r, 20));
  const unanswered = pending.size;
  for (const request of pending) record('unanswered', performance.now() - request.due, request.due);
  pending.clear();
  const elapsed = (performance.now() - start) / 1000;
  agent.destroy();
  return {
    intendedRatePerSec: ratePerSec,
    sent,
    answered,
    unanswered,
    errors,
    // Arrivals per second actually achieved by the scheduler: sent over the span of sending.
    achievedRatePerSec: sendSeconds > 0 ? (sent - 1) / sendSeconds : null,
    seconds: elapsed,
    // How late this process handed each request to the socket: the load generator's own delay,
    // part of every latency. Large values mean the figures measure the client, not the server.
    sendLagMs: tailOf(sendLags),
    maxInFlight,
    worstMsBySecond: Array.from(worstBySecond, (v) => v ?? null),
    latenciesByStatus: Object.fromEntries(byStatus),
  };
}
