// Reads newline-delimited JSON events from stdin and sends them to Tally through a durable spool.
//
//   TALLY_ENDPOINT=https://tally.example.com TALLY_INGEST_KEY=tly_live_… \
//   TALLY_SPOOL_DIR=/var/spool/tally tail -F app.log | npx tsx packages/client/examples/ndjson-relay.ts
//
// Each line is one event object. A line that is not a JSON object is reported on stderr and skipped.
// At the end of input the relay flushes and prints the client's stats as one JSON line. With
// `--acks <file>`, it appends the eventId of each event once it is on disk (one per line).
import { appendFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { TallyClient, type TallyEvent } from '../src/index.js';

const env = process.env;
const acksAt = process.argv.indexOf('--acks');
const acks = acksAt > 0 ? process.argv[acksAt + 1] : undefined;

const tally = new TallyClient({
  endpoint: env.TALLY_ENDPOINT ?? 'http://localhost:3000',
  ingestKey: env.TALLY_INGEST_KEY ?? '',
  spoolDir: env.TALLY_SPOOL_DIR ?? '.tally-spool',
  handleSignals: true,
  onError: (err) => process.stderr.write(`tally: ${err.code}: ${err.detail}\n`),
});

let line = 0;
const pending = new Set<Promise<void>>();
for await (const text of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  line++;
  if (!text.trim()) continue;
  let event: unknown;
  try {
    event = JSON.parse(text);
  } catch {
    process.stderr.write(`line ${line}: not JSON, skipped\n`);
    continue;
  }
  if (typeof event !== 'object' || event === null || Array.isArray(event)) {
    process.stderr.write(`line ${line}: not a JSON object, skipped\n`);
    continue;
  }
  const durable = tally.trackDurable(event as TallyEvent).then((id) => {
    if (acks) appendFileSync(acks, id + '\n');
  });
  const tracked: Promise<void> = durable.finally(() => pending.delete(tracked));
  pending.add(tracked);
  // Bounded memory: wait for the disk when many lines are waiting for it.
  if (pending.size >= 10_000) await Promise.race(pending);
}
await Promise.all(pending);
const report = await tally.shutdown({ timeoutMs: Number(env.TALLY_SHUTDOWN_TIMEOUT_MS ?? 30_000) });
process.stdout.write(JSON.stringify({ ...tally.stats(), ...report }) + '\n');
// Unsent events stay in the spool for the next start; stop the retry timers now.
process.exit(report.flushed ? 0 : 1);
