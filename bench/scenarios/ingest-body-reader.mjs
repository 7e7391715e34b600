// Focused measure of the ingest body reader alone (no HTTP, no database): how many bodies per
// CPU-second it reads, decompresses and parses, plain and gzip, for a 100-event batch
// (~23 KB) and a 1 MiB batch. Usage, after `npx nest build`:
//   node bench/scenarios/ingest-body-reader.mjs [distDir] [seconds]
// Pass another checkout's dist/ to compare two versions on the same machine.
import { createRequire } from 'node:module';
import path from 'node:path';
import { Readable } from 'node:stream';
import { EventEmitter } from 'node:events';
import { gzipSync } from 'node:zlib';
import { performance } from 'node:perf_hooks';
import { makeEvent, rng } from '../lib/events.mjs';

const dist = path.resolve(process.argv[2] ?? 'dist');
const seconds = Number(process.argv[3] ?? 3);
const require = createRequire(path.join(dist, 'src', 'noop.js'));
const { IngestBodyReader } = require('./ingest/ingest-body.reader.js');
const { loadConfig } = require('./config/config.js');

const config = loadConfig({
  INGEST_MAX_BYTES: String(2 * 1_048_576),
  INGEST_MAX_INFLIGHT_BYTES: String(64 * 1_048_576),
});
const reader = new IngestBodyReader(config);

function body(events) {
  const r = rng(7);
  return Buffer.from(
    JSON.stringify({ events: Array.from({ length: events }, (_, i) => makeEvent(r, `e-${i}`)) }),
  );
}

/** A request as the reader sees it: a readable stream of 16 KiB chunks with headers and a response. */
function fakeRequest(payload, gzip) {
  const chunks = [];
  for (let i = 0; i < payload.length; i += 16_384) chunks.push(payload.subarray(i, i + 16_384));
  const req = Readable.from(chunks, { objectMode: false });
  req.headers = {
    'content-type': 'application/json',
    'content-length': String(payload.length),
    ...(gzip ? { 'content-encoding': 'gzip' } : {}),
  };
  req.complete = false;
  req.on('end', () => (req.complete = true));
  const res = new EventEmitter();
  res.closed = false;
  req.res = res;
  return req;
}

async function measure(name, payload, gzip) {
  const wire = gzip ? gzipSync(payload) : payload;
  let n = 0;
  const until = performance.now() + seconds * 1000;
  // CPU time, not wall time: the figure stays comparable on a busy machine.
  const cpu = process.cpuUsage();
  while (performance.now() < until) {
    const req = fakeRequest(wire, gzip);
    await reader.read(req, 'bench-key');
    req.res.emit('close');
    n++;
  }
  const used = process.cpuUsage(cpu);
  const microsPerBody = (used.user + used.system) / n;
  console.log(
    `${name.padEnd(22)} ${microsPerBody.toFixed(0).padStart(7)} µs CPU per body  ${(1e6 / microsPerBody).toFixed(0).padStart(6)} bodies per CPU-second`,
  );
}

const small = body(100);
const large = body(4400);
await measure(`100 events ${(small.length / 1024).toFixed(0)} KB`, small, false);
await measure('100 events gzip', small, true);
await measure(`${(large.length / 1_048_576).toFixed(1)} MiB`, large, false);
await measure('1 MiB gzip', large, true);
