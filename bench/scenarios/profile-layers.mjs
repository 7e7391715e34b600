// CPU profile of the ingest server by layer: each sample goes to the innermost frame on its stack
// that belongs to a known layer, so a builtin (JSON.parse, a Buffer copy) counts for the code
// that called it. Used by `npm run bench -- --profile` (and `--ingest-only --profile`).
import fs from 'node:fs';

/** Ordered: on a sample's stack, the innermost frame that matches a layer names it. */
const LAYERS = [
  ['body reading (incl. JSON.parse)', /ingest-body\.reader/],
  ['validation', /event-validator|context-formats/],
  ['PII', /\/ingest\/pii\./],
  ['SDK formats (mapping)', /\/sdk-formats\//],
  ['suppressions', /\/common\/suppressions\//],
  ['statement building', /ingest\.repository|ingest-writer/],
  ['pg driver', /node_modules\/(pg|pg-protocol|pg-pool|pg-types|pg-connection-string|postgres-array)\//],
  [
    'logging',
    /node_modules\/(pino|pino-http|nestjs-pino|pino-std-serializers|sonic-boom|thread-stream|fast-redact)\/|common\/logger|request-id/,
  ],
  ['metrics', /node_modules\/prom-client\/|ops\/metrics|http-metrics/],
  ['rate limiting', /rate-limit|@nestjs\/throttler/],
  ['auth (key lookup)', /\/auth\//],
  ['ingest service and controller', /ingest\.service|ingest\.controller|problem\.filter|app-error/],
  ['TypeORM (connection checkout)', /node_modules\/typeorm\//],
  ['Express, Nest and helmet', /node_modules\//],
];
// Node's own HTTP and socket code, counted only when no layer above is on the stack (the
// parser, the socket reads, the response write that ends a request).
const NODE_NET =
  /^node:(_http|http|net|internal\/(http|net|stream_base|streams|js_stream|timers|async_hooks|process))/;
const STARTUP = /^node:internal\/(modules|bootstrap)/;

export function profileLayers(file) {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8'));
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const memo = new Map();
  const classify = (leaf) => {
    if (memo.has(leaf)) return memo.get(leaf);
    const { functionName } = byId.get(leaf).callFrame;
    let layer = null;
    if (functionName === '(garbage collector)') layer = 'garbage collector';
    else if (functionName === '(idle)') layer = 'idle';
    else if (functionName === '(program)') layer = 'V8 and native (unattributed)';
    else {
      let net = false;
      for (let id = leaf; id !== undefined && !layer; id = parent.get(id)) {
        const { url } = byId.get(id).callFrame;
        if (STARTUP.test(url)) layer = 'start-up (module loading)';
        else if (NODE_NET.test(url)) net = true;
        else
          for (const [name, re] of LAYERS)
            if (re.test(url)) {
              layer = name;
              break;
            }
      }
      layer ??= net ? 'node:http and net' : 'other';
    }
    memo.set(leaf, layer);
    return layer;
  };
  const totals = new Map();
  const self = new Map();
  let busy = 0;
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i] ?? 0;
    const layer = classify(id);
    totals.set(layer, (totals.get(layer) ?? 0) + dt);
    if (layer === 'idle' || layer.startsWith('start-up')) return;
    busy += dt;
    const { functionName, url, lineNumber } = byId.get(id).callFrame;
    const where = url ? ` ${url.replace(/^.*\/(node_modules|dist-\d+)\//, '')}:${lineNumber + 1}` : '';
    const key = `${functionName || '(anonymous)'}${where}`;
    const entry = self.get(key) ?? { us: 0, layer };
    entry.us += dt;
    self.set(key, entry);
  });
  // Shares are of the time the server was busy, start-up excluded. The V8 profiler samples
  // the thread's wall time, so on a shared machine a share is the reliable figure, not the ms.
  return {
    busyMs: Math.round(busy / 1000),
    top: [...self.entries()]
      .sort((a, b) => b[1].us - a[1].us)
      .slice(0, 20)
      .map(([fn, { us, layer }]) => ({ fn, layer, share: Math.round((us / busy) * 1000) / 10 })),
    layers: [...totals.entries()]
      .filter(([name]) => name !== 'idle')
      .sort((a, b) => b[1] - a[1])
      .map(([layer, us]) => ({
        layer,
        ms: Math.round(us / 1000),
        share: layer.startsWith('start-up') ? null : Math.round((us / busy) * 1000) / 10,
      })),
  };
}

// `node bench/scenarios/profile-layers.mjs <file.cpuprofile>` prints the table for a saved profile.
if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()) && process.argv[2]) {
  console.log(JSON.stringify(profileLayers(process.argv[2]), null, 2));
}
