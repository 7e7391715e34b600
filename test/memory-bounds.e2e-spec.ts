import { ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { RollupsService } from '@app/rollups/rollups.service';
import { DAY_MS, utcDateString } from '@app/common/time';
import { makeApiKey, makeTenant } from './factories';
import { seedEvents } from './factories/events';
import { seedLargeEvents } from './factories/large-events';
import { freePort } from './support/harness';
import { testDatabaseUrl, useTestApp } from './support/test-app';

const ROOT = path.resolve(__dirname, '..');
const SERVER_JS = path.join(ROOT, 'dist/src/main.js');
// The heap settings and malloc arena cap the start script gives the server (package.json config).
const {
  heapMb: HEAP_MB,
  heapStartMb: HEAP_START_MB,
  mallocArenaMax: MALLOC_ARENA_MAX,
} = (
  JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
    config: { heapMb: string; heapStartMb: string; mallocArenaMax: string };
  }
).config;
// Scaled down from the 2,000 default so that the flood stays quick; the shape is the same.
const NAME_LIMIT = 300;
const FLOOD_REQUESTS = 12;
const FLOOD_BATCH = 1000;
// What an export may add to the server's resident size over idle, whatever the window or the events.
const EXPORT_RSS_GROWTH_MB = 64;

type Tenant = Awaited<ReturnType<typeof makeTenant>>;

/** The resident size of a process now, in MB. */
function rssMb(pid: number): number {
  return Number(/^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024;
}

/** Downloads `url` whole: the bytes, and the process's peak RSS meanwhile (sampled every 20 ms). */
async function downloadWatching(
  url: string,
  key: string,
  pid: number,
): Promise<{ status: number; bytes: number; peakMb: number }> {
  let peakMb = rssMb(pid);
  const sampler = setInterval(() => (peakMb = Math.max(peakMb, rssMb(pid))), 20);
  try {
    const res = await fetch(url, { headers: { Authorization: `Bearer ${key}` } });
    let bytes = 0;
    for await (const part of res.body as unknown as AsyncIterable<Uint8Array>) bytes += part.length;
    return { status: res.status, bytes, peakMb: Math.max(peakMb, rssMb(pid)) };
  } finally {
    clearInterval(sampler);
  }
}

/** The built server as a child process with the production heap and arena limits. */
async function startServer(
  env: Record<string, string>,
): Promise<{ base: string; child: ChildProcess; log: string[] }> {
  const port = await freePort();
  const log: string[] = [];
  const heap = [`--max-old-space-size=${HEAP_MB}`, `--initial-old-space-size=${HEAP_START_MB}`];
  const child = spawn(process.execPath, [...heap, SERVER_JS], {
    cwd: ROOT,
    env: {
      ...process.env,
      MALLOC_ARENA_MAX,
      DATABASE_URL: testDatabaseUrl(),
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      ROLLUPS_ENABLED: 'false',
      DATABASE_POOL_SIZE: '6',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (d: Buffer) => log.push(d.toString()));
  child.stderr!.on('data', (d: Buffer) => log.push(d.toString()));
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`the server exited at start: ${log.join('')}`);
    const up = await fetch(`${base}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) return { base, child, log };
    if (i > 600) throw new Error('the server did not come up');
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('one tenant cannot exhaust the memory of a server with the production heap limit', () => {
  // The in-process app computes the rollups: with the same limit as the server.
  const t = useTestApp({ INGEST_MAX_EVENT_NAMES_PER_DAY: String(NAME_LIMIT) });
  const stop = { done: false };
  let server: Awaited<ReturnType<typeof startServer>>;

  beforeAll(async () => {
    if (!existsSync(SERVER_JS)) throw new Error('dist/src/main.js is missing: run npm run build first');
    server = await startServer({
      INGEST_MAX_EVENT_NAMES_PER_DAY: String(NAME_LIMIT),
      INGEST_RATE_EVENTS: '1000000',
      // The victim loops back to back: this test is about memory, not the request rates.
      INGEST_RATE_REQUESTS: '100000',
      READ_RATE_REQUESTS: '100000',
      READ_TIME_MS_PER_SECOND: '100000',
    });
  }, 60_000);
  afterAll(() => {
    stop.done = true;
    server?.child.kill('SIGKILL');
  });

  const call = (key: string, pathAndQuery: string, body?: unknown) =>
    fetch(`${server.base}${pathAndQuery}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(60_000),
    });

  /** Another tenant's ingest and reads, one after another, until `stop`; every status seen. */
  function victim(tenant: Tenant, stop: { done: boolean }): Promise<number[]> {
    return (async () => {
      const statuses: number[] = [];
      for (let i = 0; !stop.done; i++) {
        const ingest = await call(tenant.liveKey, '/api/ingest', {
          events: [{ eventName: 'Victim.tick' }],
        }).catch(() => null);
        statuses.push(ingest?.status ?? 0);
        const read = await call(tenant.apiKey, `/api/v1/rollups?appId=${tenant.appId}&range=7d`).catch(
          () => null,
        );
        statuses.push(read?.status ?? 0);
        await read?.arrayBuffer();
      }
      return statuses;
    })();
  }

  /** Ends the victim's loop: it was served throughout (every answer a 200), and the server still runs. */
  async function expectVictimServed(watching: Promise<number[]>): Promise<void> {
    stop.done = true;
    const statuses = await watching;
    expect(statuses.length).toBeGreaterThan(2);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(server.child.exitCode).toBeNull();
  }

  /** Every page of a rollups query, as the dashboard and TallyReader read it. */
  async function readAllRollups(tenant: Tenant, query: string): Promise<{ rows: number; pages: number }> {
    let url: string | null = `/api/v1/rollups?appId=${tenant.appId}&${query}`;
    let rows = 0;
    let pages = 0;
    while (url) {
      const res: Response = await call(tenant.apiKey, url);
      expect(res.status).toBe(200);
      rows += ((await res.json()) as unknown[]).length;
      pages++;
      const link = /^<([^>]+)>; rel="next"$/.exec(res.headers.get('link') ?? '');
      url = link ? link[1] : null;
    }
    return { rows, pages };
  }

  it('survives a name flood, then 30-day rollups reads, a dashboard load and the largest events pages', async () => {
    const attacker = await makeTenant(t.app);
    const other = await makeTenant(t.app);
    const watching = victim(other, stop);

    // The flood: batches of events that each carry a unique 150-character name, over three days.
    const now = Date.now();
    let accepted = 0;
    let refused = 0;
    for (let r = 0; r < FLOOD_REQUESTS; r++) {
      const events = Array.from({ length: FLOOD_BATCH }, (_, i) => ({
        eventName: `${r}.${i}.`.padEnd(150, 'x'),
        eventTime: now - (i % 3) * DAY_MS,
      }));
      const res = await call(attacker.liveKey, '/api/ingest', { events });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { accepted: number; errorCounts: Record<string, number> };
      accepted += body.accepted;
      refused += body.errorCounts.too_many_event_names ?? 0;
    }
    expect(accepted).toBe(3 * NAME_LIMIT);
    expect(refused).toBe(FLOOD_REQUESTS * FLOOD_BATCH - 3 * NAME_LIMIT);

    // Stored behind ingest's back as well (as a restart or several instances could let through):
    // the computation still keeps at most the limit's names per app-day.
    const day = now - 4 * DAY_MS;
    await seedEvents(
      t.db,
      attacker.appId,
      Array.from({ length: 3 * NAME_LIMIT }, (_, i) => ({ eventName: `Seeded.${i}`, receivedAt: day })),
    );
    await t.app.get(RollupsService).compute({ appId: attacker.appId });
    const perDay = (await t.db.query(
      `SELECT day::text AS day, count(*)::int AS rows FROM rollups WHERE app_id = $1 GROUP BY day ORDER BY day`,
      [attacker.appId],
    )) as { day: string; rows: number }[];
    expect(perDay.map((d) => d.day)).toEqual([4, 2, 1, 0].map((n) => utcDateString(now - n * DAY_MS)));
    for (const d of perDay) expect(d.rows).toBe(NAME_LIMIT + 1);

    // The dashboard's default view (30 days), read page by page, twice at once, and the page itself.
    const [a, b] = await Promise.all([
      readAllRollups(attacker, 'range=30d'),
      readAllRollups(attacker, 'range=30d'),
    ]);
    expect(a).toEqual({ rows: 4 * (NAME_LIMIT + 1), pages: 1 });
    expect(b).toEqual(a);
    const page = await fetch(`${server.base}/dashboard`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('top-events');

    // The largest events pages there can be: 1,000 events of about 30 KiB each, read at once.
    const big = Object.fromEntries(Array.from({ length: 100 }, (_, k) => [`k${k}`, 'v'.repeat(300)]));
    await seedEvents(
      t.db,
      attacker.appId,
      Array.from({ length: 1000 }, (_, i) => ({
        eventName: 'Big.payload',
        receivedAt: now - i,
        payload: big,
      })),
    );
    const reads = await Promise.all(
      [0, 1].map(async () => {
        const res = await call(
          attacker.apiKey,
          `/api/v1/events?appId=${attacker.appId}&eventName=Big.payload&limit=1000`,
        );
        return { status: res.status, bytes: (await res.arrayBuffer()).byteLength };
      }),
    );
    for (const r of reads) {
      expect(r.status).toBe(200);
      expect(r.bytes).toBeGreaterThan(30_000_000);
    }

    await expectVictimServed(watching);
    expect((await fetch(`${server.base}/healthz`)).status).toBe(200);
    const metrics = await (await fetch(`${server.base}/metrics`)).text();
    const heap = Number(/^nodejs_heap_size_used_bytes (\S+)$/m.exec(metrics)?.[1]);
    // The peak resident size of the whole process (heap, buffers, code), for the docs.
    const status = readFileSync(`/proc/${server.child.pid}/status`, 'utf8');
    const peakMb = Number(/^VmHWM:\s+(\d+) kB$/m.exec(status)?.[1]) / 1024;
    process.stdout.write(
      `memory bounds: heap used after the reads ${(heap / 1_048_576).toFixed(0)} MB of ${HEAP_MB} MB; ` +
        `peak RSS ${peakMb.toFixed(0)} MB\n`,
    );
  }, 300_000);
  it('pages the 30-day view of 200,000 rollup rows stored before the bound, as after a restart', async () => {
    // What the unbounded flood left behind: 200,000 rows of 150-character names over three days.
    // Without paging, a 30-day read of them ran the server out of heap on every start.
    const flooded = await makeTenant(t.app);
    const other = await makeTenant(t.app);
    const now = Date.now();
    await t.db.query(
      `INSERT INTO rollups (app_id, day, is_test_mode, event_name, events, unique_users, unique_sessions,
                            fv_count, computed_at)
       SELECT $1, $2::date - (g % 3), false, rpad(g::text || '.', 150, 'x'), 1, 1, 1, 0, now()
         FROM generate_series(1, 200000) AS g`,
      [flooded.appId, utcDateString(now)],
    );
    stop.done = false;
    const watching = victim(other, stop);
    const all = await readAllRollups(flooded, 'range=30d');
    expect(all).toEqual({ rows: 200_000, pages: 40 });
    const page = await fetch(`${server.base}/dashboard`);
    expect(page.status).toBe(200);
    await expectVictimServed(watching);
  }, 300_000);

  /** V8's external memory (buffers outside the heap) of the server, in MB, a second after an export. */
  async function externalMb(): Promise<number> {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const metrics = await (await fetch(`${server.base}/metrics`)).text();
    return Number(/^nodejs_external_memory_bytes (\S+)$/m.exec(metrics)?.[1]) / 1_048_576;
  }

  it('exports 170 MB of 29 KB events as NDJSON and as Parquet within a flat memory bound', async () => {
    const tenant = await makeTenant(t.app);
    const key = (await makeApiKey(t.app, [tenant.appId], ['events:export'])).key;
    const from = Date.now() - 2 * 3_600_000;
    await seedLargeEvents(t.db, tenant.appId, from, 6000);
    const url = (format: string, to = from + 3_600_000) =>
      `${server.base}/api/v1/export?appId=${tenant.appId}&from=${from}&to=${to}&format=${format}`;
    // Warm: both formats once over a few events, so that what follows is the export's own memory.
    for (const format of ['ndjson', 'parquet'])
      expect((await downloadWatching(url(format, from + 50), key, server.child.pid!)).status).toBe(200);
    const idleMb = rssMb(server.child.pid!);
    const idleExternal = await externalMb();
    const ndjson = await downloadWatching(url('ndjson'), key, server.child.pid!);
    const afterNdjson = await externalMb();
    const parquet = await downloadWatching(url('parquet'), key, server.child.pid!);
    const afterParquet = await externalMb();
    expect(ndjson.status).toBe(200);
    expect(ndjson.bytes).toBeGreaterThan(6000 * 28_800);
    expect(parquet.status).toBe(200);
    process.stdout.write(
      `export memory: idle ${idleMb.toFixed(0)} MB; peak NDJSON ${ndjson.peakMb.toFixed(0)} MB, ` +
        `Parquet ${parquet.peakMb.toFixed(0)} MB (${(ndjson.bytes / 1_048_576).toFixed(0)} MB of NDJSON); ` +
        `external memory idle ${idleExternal.toFixed(0)} MB, after NDJSON ${afterNdjson.toFixed(0)} MB, after Parquet ${afterParquet.toFixed(0)} MB\n`,
    );
    expect(ndjson.peakMb - idleMb).toBeLessThanOrEqual(EXPORT_RSS_GROWTH_MB);
    expect(parquet.peakMb - idleMb).toBeLessThanOrEqual(EXPORT_RSS_GROWTH_MB);
  }, 300_000);
});
