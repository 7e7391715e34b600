// Test helpers that run the real, built Tally server as a child process (so it can be killed),
// create tenants with its admin CLI, and put a fault-injecting TCP proxy in front of it.
import { ChildProcess, execFile } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';

// The repository's one harness for ports and processes; the client's live tests run inside it.
// eslint-disable-next-line no-restricted-imports
import { freePort, startNodeProcess } from '../../../test/support/harness.js';

export const ROOT = path.resolve(__dirname, '..', '..', '..');
const SERVER_JS = path.join(ROOT, 'dist/src/main.js');
const CLI_JS = path.join(ROOT, 'dist/src/cli/main.js');

export function databaseUrl(): string {
  const url = process.env.TALLY_TEST_DATABASE_URL;
  if (!url) throw new Error('TALLY_TEST_DATABASE_URL is not set; run the tests through jest');
  return url;
}

export interface LiveServer {
  base: string;
  port: number;
  child: ChildProcess;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

const UNTHROTTLED = {
  INGEST_RATE_REQUESTS: '10000000',
  INGEST_RATE_EVENTS: '1000000000',
  READ_RATE_REQUESTS: '10000000',
  AUTH_FAILURE_LIMIT: '10000000',
};

export async function startServer(env: Record<string, string> = {}, at?: number): Promise<LiveServer> {
  const port = at ?? (await freePort());
  const server = await startNodeProcess(SERVER_JS, {
    cwd: ROOT,
    env: {
      DATABASE_URL: databaseUrl(),
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      ROLLUPS_ENABLED: 'false',
      DATABASE_POOL_SIZE: '4',
      ...UNTHROTTLED,
      ...env,
    },
  });
  return {
    base: `http://127.0.0.1:${port}`,
    port,
    child: server.child,
    async kill(signal = 'SIGKILL') {
      await server.kill(signal);
    },
  };
}

function cli(args: string[]): Promise<Record<string, string>> {
  return new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      [CLI_JS, ...args, '--json'],
      { cwd: ROOT, env: { ...process.env, DATABASE_URL: databaseUrl(), LOG_LEVEL: 'warn' } },
      (err, stdout, stderr) => (err ? reject(new Error(stderr || err.message)) : resolve(JSON.parse(stdout))),
    ),
  );
}

export async function makeTenant(name: string) {
  const app = await cli(['apps', 'create', '--name', name]);
  const ingest = await cli(['keys', 'create-ingest', '--app', app.id]);
  const api = await cli([
    'keys',
    'create-api',
    '--app',
    app.id,
    '--scope',
    'events:read',
    '--scope',
    'rollups:read',
  ]);
  return { appId: app.id, ingestKey: ingest.key, apiKey: api.key };
}

/**
 * A TCP proxy that forwards every request, and with probability `dropRate` closes the client's
 * connection instead of passing a response on: the server has done the work, the client never
 * hears of it.
 */
export async function startLossyProxy(target: number, dropRate: number, random: () => number = Math.random) {
  const sockets = new Set<net.Socket>();
  let dropped = 0;
  const server = net.createServer((client) => {
    const upstream = net.connect(target, '127.0.0.1');
    sockets.add(client).add(upstream);
    client.on('close', () => sockets.delete(client));
    upstream.on('close', () => sockets.delete(upstream));
    client.pipe(upstream);
    upstream.on('data', (chunk) => {
      if (random() < dropRate) {
        dropped++;
        client.destroy();
        upstream.destroy();
        return;
      }
      client.write(chunk);
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end);
    upstream.on('error', end);
    upstream.on('end', () => client.end());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    base: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    dropped: () => dropped,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

export type Fault = 'reset' | 'lost' | '503' | '429';

/**
 * An HTTP proxy that fails a share `rate` of the requests, in turn: `reset` (the connection is
 * destroyed before the request reaches the server), `lost` (the server stores the batch, and the
 * answer is destroyed on its way back), `503` and `429` with `Retry-After: 1` (answered by the
 * proxy). Which requests fail is drawn from a seeded generator, so a run is reproducible.
 */
export async function startFaultyProxy(target: number, rate: number, seed = 1) {
  let state = seed >>> 0 || 1;
  const random = () => {
    // xorshift32
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 2 ** 32;
  };
  const kinds: Fault[] = ['reset', 'lost', '503', '429'];
  const faults: Record<Fault, number> = { reset: 0, lost: 0, '503': 0, '429': 0 };
  let requests = 0;
  let next = 0;
  const agent = new http.Agent({ keepAlive: true });
  const server = http.createServer((req, res) => {
    requests++;
    const fault = random() < rate ? kinds[next++ % kinds.length] : undefined;
    if (fault) faults[fault]++;
    if (fault === 'reset') {
      req.socket.destroy();
      return;
    }
    if (fault === '503' || fault === '429') {
      req.resume();
      req.on('end', () => {
        const headers: Record<string, string> = { 'content-type': 'application/problem+json' };
        if (fault === '429') headers['retry-after'] = '1';
        res.writeHead(Number(fault), headers);
        res.end(
          JSON.stringify({ status: Number(fault), code: fault === '429' ? 'rate_limited' : 'unavailable' }),
        );
      });
      return;
    }
    const upstream = http.request(
      { host: '127.0.0.1', port: target, method: req.method, path: req.url, headers: req.headers, agent },
      (answer) => {
        if (fault === 'lost') {
          answer.resume();
          answer.on('end', () => req.socket.destroy());
          return;
        }
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => req.socket.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    base: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    requests: () => requests,
    faults: () => ({ ...faults }),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        agent.destroy();
        server.close(() => r());
      }),
  };
}
