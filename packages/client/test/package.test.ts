// The packed package, installed into a project outside the repository, loaded with require() and
// with import, tracks an event against a stub ingest endpoint.
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

jest.setTimeout(120_000);

const PACKAGE = resolve(__dirname, '..');
// The client supports older Node releases than the server: CI names the oldest one it has in
// TALLY_CLIENT_OLDEST_NODE (a path to its `node`), and the package is loaded with it too.
const NODES = [process.execPath, process.env.TALLY_CLIENT_OLDEST_NODE].filter((n): n is string => !!n);

const SCRIPT = (load: string) => `${load}
const tally = new TallyClient({ endpoint: process.argv[2], ingestKey: 'tly_live_x', onError: (e) => console.error(e.message) });
tally.track({ eventName: 'Package.loaded', payload: { via: process.argv[3] } });
tally.shutdown().then((report) => console.log(JSON.stringify({ report, stats: tally.stats() })));
`;

describe('@tally/client from a project outside the repository', () => {
  let dir: string;
  let server: Server;
  let endpoint: string;
  const received: unknown[] = [];

  beforeAll(async () => {
    execFileSync('npm', ['run', 'build'], { cwd: PACKAGE, stdio: 'pipe' });
    dir = mkdtempSync(join(tmpdir(), 'tally-client-consumer-'));
    const packed = JSON.parse(
      execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: PACKAGE, encoding: 'utf8' }),
    ) as { filename: string }[];
    const project = join(dir, 'app');
    execFileSync('mkdir', [project]);
    writeFileSync(
      join(project, 'package.json'),
      JSON.stringify({
        name: 'consumer',
        private: true,
        dependencies: { '@tally/client': `file:../${packed[0].filename}` },
      }),
    );
    execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts'], {
      cwd: project,
      stdio: 'pipe',
    });
    writeFileSync(join(project, 'main.cjs'), SCRIPT("const { TallyClient } = require('@tally/client');"));
    writeFileSync(join(project, 'main.mjs'), SCRIPT("import { TallyClient } from '@tally/client';"));
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        const events = (JSON.parse(body) as { events: unknown[] }).events;
        received.push(...events);
        const n = events.length;
        res.setHeader('content-type', 'application/json');
        res.end(
          JSON.stringify({
            received: n,
            accepted: n,
            duplicates: 0,
            rejected: 0,
            metered: n,
            errors: [],
            warnings: [],
          }),
        );
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise((r) => server?.close(r));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it.each(
    NODES.flatMap((node) => [
      ['require', 'main.cjs', node],
      ['import', 'main.mjs', node],
    ]),
  )('loads with %s (%s) and tracks an event on %s', async (via, file, node) => {
    // execFile, not execFileSync: the stub server runs in this process.
    const out = await new Promise<string>((res, rej) =>
      execFile(node, [file, endpoint, via], { cwd: join(dir, 'app') }, (err, stdout) =>
        err ? rej(err) : res(stdout),
      ),
    );
    expect(JSON.parse(out)).toMatchObject({ report: { flushed: true, unsent: 0 }, stats: { accepted: 1 } });
    expect(received).toContainEqual(
      expect.objectContaining({ eventName: 'Package.loaded', payload: { via } }),
    );
  });
});
