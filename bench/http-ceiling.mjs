// The HTTP ceiling: a bare node:http server that reads an ingest body, parses it with JSON.parse
// and answers 200 with the same counters as Tally. No framework, no validation, no database: what
// Node itself can do on this machine is the upper bound for the real endpoint.
//
// Usage: node bench/http-ceiling.mjs <port>
import http from 'node:http';
import zlib from 'node:zlib';

const port = Number(process.argv[2] ?? 0);

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/healthz') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"status":"ok"}');
    return;
  }
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    let raw = Buffer.concat(chunks);
    if (req.headers['content-encoding'] === 'gzip') raw = zlib.gunzipSync(raw);
    let n;
    try {
      n = JSON.parse(raw.toString('utf8')).events.length;
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end('{"code":"invalid_json"}');
      return;
    }
    const body = JSON.stringify({ received: n, accepted: n, duplicates: 0, rejected: 0, metered: n });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
});

server.keepAliveTimeout = 65_000;
server.listen(port, '127.0.0.1');
process.on('SIGTERM', () => server.close(() => process.exit(0)));
