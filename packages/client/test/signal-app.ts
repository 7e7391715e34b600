// A process with handleSignals on: it tracks one event, signals itself, and prints what happened.
//   argv: <signal> <with-listener: yes|no>
import { TallyClient } from '../src/index.js';

const [signal, withListener] = process.argv.slice(2) as [NodeJS.Signals, string];
let sent = 0;
const client = new TallyClient({
  endpoint: 'http://tally.test',
  ingestKey: 'tly_live_x',
  handleSignals: true,
  shutdownTimeoutMs: 5000,
  flushIntervalMs: 60_000,
  fetch: (async (_url: string, init: RequestInit) => {
    sent += (JSON.parse(String(init.body)) as { events: unknown[] }).events.length;
    const result = {
      received: sent,
      accepted: sent,
      duplicates: 0,
      rejected: 0,
      metered: sent,
      errors: [],
      warnings: [],
    };
    return new Response(JSON.stringify(result), { status: 200 });
  }) as typeof fetch,
});
process.on('exit', (code) => process.stdout.write(`exit ${code} sent ${sent}\n`));
if (withListener === 'yes') {
  let calls = 0;
  process.on(signal, () => {
    calls++;
    process.stdout.write(`app listener ${calls}\n`);
    // The application's own shutdown: it gives the client time to flush, then exits.
    const wait = setInterval(() => {
      if (client.stats().accepted === 1) {
        clearInterval(wait);
        process.exit(0);
      }
    }, 5);
  });
}
client.track({ eventName: 'Signal.sent' });
// Keeps the process alive until a handler ends it.
setInterval(() => undefined, 1000);
process.kill(process.pid, signal);
