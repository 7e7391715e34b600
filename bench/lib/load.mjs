// A thin wrapper around autocannon that runs a fixed number of requests, so that every request it
// sends is answered before it returns and the database can be compared with the answers exactly.
import autocannon from 'autocannon';

/**
 * Sends `amount` requests over `connections` keep-alive connections.
 *
 * - `body`: `(i) => body` of the i-th request (string or Buffer), an array of fixed bodies sent in
 *   turn, or none for a GET.
 * - `count`: parse the 200 answers of ingest and sum `received`, `accepted`, `duplicates`, `rejected`.
 * - `maxSeconds`: a safety stop. When it fires, requests in flight are abandoned and the run is
 *   marked `stoppedEarly`, because the server may still commit what the client never saw.
 * - `sampleMs`: autocannon's sampling interval. A run of `amount` requests ends only at the
 *   sample after its last answer, so with the default 1000 ms its `seconds` are rounded up to
 *   whole seconds; a short interval makes the rate of a short run exact.
 */
export async function runLoad({
  url,
  method = 'GET',
  headers = {},
  body,
  connections,
  amount,
  count = false,
  maxSeconds = 60,
  sampleMs = 1000,
}) {
  const sums = { received: 0, accepted: 0, duplicates: 0, rejected: 0, metered: 0 };
  let badBodies = 0;
  let sent = 0;
  let requests = [{}];
  if (Array.isArray(body)) {
    // Fixed bodies: autocannon encodes each request once, so the client costs least.
    requests = body.map((b) => ({ body: b }));
  } else if (body) {
    const request = requests[0];
    request.setupRequest = (req) => {
      req.body = body(sent++);
      return req;
    };
  }
  if (count) {
    const onResponse = (status, text) => {
      if (status !== 200) return;
      try {
        const r = JSON.parse(text);
        for (const k of Object.keys(sums)) if (typeof r[k] === 'number') sums[k] += r[k];
      } catch {
        badBodies++;
      }
    };
    for (const request of requests) request.onResponse = onResponse;
  }
  const instance = autocannon({
    url,
    method,
    headers,
    connections: Math.min(connections, amount),
    amount,
    timeout: 30,
    sampleInt: sampleMs,
    requests,
  });
  const started = process.hrtime.bigint();
  let stoppedEarly = false;
  const watchdog = setTimeout(() => {
    stoppedEarly = true;
    instance.stop();
  }, maxSeconds * 1000);
  const result = await instance;
  clearTimeout(watchdog);
  const completed = Object.values(result.statusCodeStats ?? {}).reduce((n, s) => n + Number(s.count), 0);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return {
    connections: result.connections,
    requests: completed,
    seconds,
    requestsPerSec: completed / seconds,
    latencyMs: {
      p50: result.latency.p50,
      p90: result.latency.p90,
      p99: result.latency.p99,
      max: result.latency.max,
      mean: Math.round(result.latency.average * 100) / 100,
    },
    errors: result.errors,
    timeouts: result.timeouts,
    non2xx: result.non2xx,
    statusCodes: Object.fromEntries(
      Object.entries(result.statusCodeStats ?? {}).map(([k, v]) => [k, Number(v.count)]),
    ),
    badBodies,
    stoppedEarly,
    ...(count ? { totals: sums, eventsPerSec: sums.accepted / seconds } : {}),
  };
}

/** Percentiles of a list of durations in ms. */
export function percentiles(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (p) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
  const round = (v) => Math.round(v * 100) / 100;
  return { n: sorted.length, p50: round(at(50)), p99: round(at(99)), max: round(sorted[sorted.length - 1]) };
}
