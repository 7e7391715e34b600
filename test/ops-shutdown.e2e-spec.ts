import { ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { makeTenant } from './factories';
import { testDatabaseUrl, useTestApp } from './support/test-app';
import { freePort } from './support/harness';

// Runs the built server (`npm test` builds it first) as a child process, as in production.
const MAIN = path.join(__dirname, '..', 'dist', 'src', 'main.js');
const EVENTS_PER_REQUEST = 25;
const IN_FLIGHT = 5;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function startServer(port: number): Promise<{ child: ChildProcess; output: () => string }> {
  const child = spawn(process.execPath, [MAIN], {
    env: {
      ...process.env,
      DATABASE_URL: testDatabaseUrl(),
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'silent',
      ROLLUPS_ENABLED: 'false',
      DATABASE_POOL_SIZE: '4',
      SHUTDOWN_TIMEOUT_MS: '10000',
      REDIS_URL: '',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}`)), 60_000);
    child.stdout!.on('data', () => {
      if (output.includes('Tally listening')) {
        clearTimeout(timer);
        resolve({ child, output: () => output });
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${output}`));
    });
  });
}

interface Answer {
  status: number;
  body: { accepted?: number; received?: number };
}

/** Sends the headers and half the body now; `finish()` sends the rest and resolves the answer. */
function slowIngest(port: number, key: string, body: string) {
  const bytes = Buffer.from(body);
  const half = Math.floor(bytes.length / 2);
  let resolveAnswer: (a: Answer) => void;
  let rejectAnswer: (e: Error) => void;
  const answer = new Promise<Answer>((resolve, reject) => {
    resolveAnswer = resolve;
    rejectAnswer = reject;
  });
  const req = http.request(
    {
      host: '127.0.0.1',
      port,
      method: 'POST',
      path: '/api/ingest',
      agent: false,
      headers: {
        Authorization: `Bearer ${key}`,
        'Content-Type': 'application/json',
        'Content-Length': String(bytes.length),
      },
    },
    (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => {
        try {
          resolveAnswer({ status: res.statusCode ?? 0, body: JSON.parse(text) });
        } catch (err) {
          rejectAnswer(err as Error);
        }
      });
    },
  );
  req.on('error', (err) => rejectAnswer(err));
  req.write(bytes.subarray(0, half));
  return {
    finish(): Promise<Answer> {
      req.end(bytes.subarray(half));
      return answer;
    },
  };
}

function connectionRefused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
  });
}

describe('graceful shutdown on SIGTERM', () => {
  const t = useTestApp();

  beforeAll(async () => {
    if (!fs.existsSync(MAIN)) throw new Error(`${MAIN} is missing: run npm run build first`);
  });

  it('answers in-flight ingest requests, loses no acknowledged event, refuses new connections and exits 0', async () => {
    const tenant = await makeTenant(t.app);
    const port = await freePort();
    const { child, output } = await startServer(port);
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));

    // An idle keep-alive connection, as a load balancer or SDK would hold: it must not keep the
    // process alive.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const idleClosed = new Promise<void>((resolve) => {
      http.get({ host: '127.0.0.1', port, path: '/healthz', agent }, (res) => {
        res.resume();
        res.socket.once('close', () => resolve());
      });
    });

    const batches = Array.from({ length: IN_FLIGHT }, (_, r) =>
      Array.from({ length: EVENTS_PER_REQUEST }, (_, i) => ({
        eventName: 'Shutdown.tested',
        eventId: `shutdown-${r}-${i}`,
        payload: { request: r, index: i },
      })),
    );
    const requests = batches.map((events) => slowIngest(port, tenant.liveKey, JSON.stringify({ events })));
    // Let the server take the requests in before the signal: they are in flight, bodies half read.
    await sleep(500);
    child.kill('SIGTERM');

    let refused = false;
    for (let i = 0; i < 50 && !refused; i++) {
      refused = await connectionRefused(port);
      if (!refused) await sleep(100);
    }
    expect(refused).toBe(true);

    const answers = await Promise.all(requests.map((r) => r.finish()));
    expect(answers.map((a) => a.status)).toEqual(Array(IN_FLIGHT).fill(200));
    expect(answers.map((a) => a.body.accepted)).toEqual(Array(IN_FLIGHT).fill(EVENTS_PER_REQUEST));

    expect(await exited).toBe(0);
    await idleClosed;
    agent.destroy();
    expect(output()).toContain('SIGTERM received, draining');

    // Every acknowledged event is stored.
    const rows: { event_id: string }[] = await t.db.query(
      'SELECT event_id FROM events WHERE app_id = $1 ORDER BY event_id',
      [tenant.appId],
    );
    const expected = batches.flat().map((e) => e.eventId);
    expect(rows.map((r) => r.event_id).sort()).toEqual(expected.sort());
  });
});
