import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { makeTenant } from './factories';
import { testDatabaseUrl, useTestApp } from './support/test-app';
import { freePort, startNodeProcess, waitFor } from './support/harness';

// Runs the built server (`npm test` builds it first) as a child process, as in production.
const MAIN = path.join(__dirname, '..', 'dist', 'src', 'main.js');
const EVENTS_PER_REQUEST = 25;
const IN_FLIGHT = 5;

function startServer(port: number) {
  return startNodeProcess(MAIN, {
    env: {
      DATABASE_URL: testDatabaseUrl(),
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'silent',
      ROLLUPS_ENABLED: 'false',
      DATABASE_POOL_SIZE: '4',
      SHUTDOWN_TIMEOUT_MS: '10000',
      REDIS_URL: '',
    },
  });
}

/** The ingest body bytes the server holds (/metrics' in-flight budget in use). */
async function heldBytes(port: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return Number(/^tally_ingest_inflight_bytes (\d+)/m.exec(text)?.[1] ?? 0);
}

interface Answer {
  status: number;
  body: { accepted?: number; received?: number };
}

/** Sends the headers and half the body now; `finish()` sends the rest and resolves the answer. */
function slowIngest(port: number, key: string, body: string) {
  const bytes = Buffer.from(body);
  const half = Math.floor(bytes.length / 2);
  sentHalves += half;
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

let sentHalves = 0;

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
    const { child, output, exited } = await startServer(port);

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
    // The signal comes once the server holds the first half of every body: in flight, half read.
    await waitFor(async () => (await heldBytes(port)) >= sentHalves, { what: 'the half bodies to be held' });
    child.kill('SIGTERM');

    await waitFor(() => connectionRefused(port), {
      timeoutMs: 5_000,
      intervalMs: 100,
      what: 'refused connections',
    });

    const answers = await Promise.all(requests.map((r) => r.finish()));
    expect(answers.map((a) => a.status)).toEqual(Array(IN_FLIGHT).fill(200));
    expect(answers.map((a) => a.body.accepted)).toEqual(Array(IN_FLIGHT).fill(EVENTS_PER_REQUEST));

    expect((await exited).code).toBe(0);
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
