import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import { asExported } from './support/databases';
import { DuckDBInstance } from '@duckdb/node-api';
import { bearer, makeApiKey, makeApp } from './factories';
import { seedLargeEvents } from './factories/large-events';
import { useTestApp, type TestApp } from './support/test-app';
import { expectProblem } from './support/problem';
import { ExportRepository, type ExportPosition } from '../src/export/export.repository';
import { ChunkBuffers } from '../src/export/chunk-buffers';
import { copyExtent } from '../src/export/copy-rows';
import { ExportUserKeys } from '@app/export/export-user-keys';
import { ParquetEncoder } from '../src/export/export-parquet';
import { CursorSecretRepository } from '../src/common/reads/cursor-secret.repository';
import { EXPORT_CHUNK_BYTES } from '../src/export/export.service';
import { PARQUET_ROW_GROUP_BYTES } from '../src/export/export-parquet';

const HOUR = 3_600_000;
const IDLE_TIMEOUT_MS = 2_000;
const READ_MS_PER_SECOND = 100;

/** Raw bytes of a response, for supertest. */
function binary(res: request.Response, callback: (err: Error | null, body: Buffer) => void) {
  const parts: Buffer[] = [];
  res.on('data', (part: Buffer) => parts.push(part));
  res.on('end', () => callback(null, Buffer.concat(parts)));
}

function listening(t: TestApp): AddressInfo {
  if (!t.http.listening) t.http.listen(0);
  return t.http.address() as AddressInfo;
}

/** An app with `count` events of about 29 KB, and a key that may export and read them. */
async function largeApp(t: TestApp, from: number, count: number) {
  const appId = (await makeApp(t.app)).id;
  const key = (await makeApiKey(t.app, [appId], ['events:export', 'events:read'])).key;
  await seedLargeEvents(t.db, appId, from, count);
  return { appId, key };
}

describe('GET /api/v1/export of large events', () => {
  const t = useTestApp({
    AUTH_FAILURE_LIMIT: '1000',
    READ_RATE_REQUESTS: '100000',
    READ_TIME_MS_PER_SECOND: '1000000',
    EXPORT_SETTLE_MS: '1000',
    EXPORT_MAX_CONCURRENT: '4',
    EXPORT_IDLE_TIMEOUT_MS: String(IDLE_TIMEOUT_MS),
  });
  const base = Date.now() - 2 * HOUR;
  let large: { appId: string; key: string };

  beforeAll(async () => {
    // 600 events of about 29 KB: 17 MB, a few chunks and row groups by bytes, one by rows.
    large = await largeApp(t, base, 600);
  });

  const exportOf = (appId: string, key: string, format = 'ndjson') =>
    request(t.http)
      .get('/api/v1/export')
      .query({ appId, from: base, to: base + HOUR, format })
      .set(bearer(key));

  it('reads chunks bounded in bytes, and writes each line byte for byte as GET /api/v1/events writes the record', async () => {
    const repository = t.app.get(ExportRepository);
    const sizes: number[] = [];
    const original = repository.copyChunk.bind(repository);
    const reads = jest.spyOn(repository, 'copyChunk').mockImplementation(async (...args) => {
      const copy = await original(...args);
      sizes.push(copy.length);
      return copy;
    });
    let res: request.Response;
    try {
      res = await exportOf(large.appId, large.key);
    } finally {
      reads.mockRestore();
    }
    expect(res.status).toBe(200);
    const page = await request(t.http)
      .get('/api/v1/events')
      .query({ appId: large.appId, limit: 1000 })
      .set(bearer(large.key));
    expect(page.status).toBe(200);
    const records = await asExported(
      t.db,
      (page.body as { appId: string; anonymousUserId: string | null }[]).reverse(),
    );
    expect(records).toHaveLength(600);
    expect(res.text).toBe(records.map((record) => JSON.stringify(record) + '\n').join(''));
    expect(Buffer.byteLength(res.text)).toBeGreaterThan(600 * 28_800);
    // Each chunk stops at its byte bound (its last row may cross it), and one more read ends it.
    expect(sizes.length).toBeGreaterThanOrEqual(Math.ceil((600 * 28_800) / EXPORT_CHUNK_BYTES));
    for (const size of sizes) expect(size).toBeLessThan(EXPORT_CHUNK_BYTES + 64 * 1024);
  });

  it('writes Parquet in row groups bounded in bytes, which DuckDB reads back as the NDJSON records', async () => {
    const ndjson = (await exportOf(large.appId, large.key)).text
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as { eventId: string; payload: unknown; receivedAt: number });
    const res = await exportOf(large.appId, large.key, 'parquet').buffer(true).parse(binary);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/vnd.apache.parquet');
    const dir = mkdtempSync(join(tmpdir(), 'tally-export-'));
    try {
      const file = join(dir, 'events.parquet');
      writeFileSync(file, res.body as Buffer);
      const db = await DuckDBInstance.create(':memory:');
      const conn = await db.connect();
      const groups = await conn.runAndReadAll(
        `SELECT row_group_id, any_value(row_group_num_rows)::INTEGER, sum(total_uncompressed_size)::BIGINT
           FROM parquet_metadata('${file}') GROUP BY row_group_id ORDER BY row_group_id`,
      );
      const rowGroups = groups
        .getRows()
        .map(([, rows, bytes]) => ({ rows: Number(rows), bytes: Number(bytes) }));
      // A group is whole chunks: it ends at the first chunk that takes it to its bound.
      expect(rowGroups.length).toBeGreaterThanOrEqual(
        Math.floor((600 * 28_800) / (PARQUET_ROW_GROUP_BYTES + EXPORT_CHUNK_BYTES)),
      );
      expect(rowGroups.length).toBeGreaterThan(1);
      expect(rowGroups.reduce((sum, g) => sum + g.rows, 0)).toBe(600);
      for (const g of rowGroups) expect(g.bytes).toBeLessThan(PARQUET_ROW_GROUP_BYTES + EXPORT_CHUNK_BYTES);
      const all = await conn.runAndReadAll(
        `SELECT "eventId", epoch_ms("receivedAt")::DOUBLE, payload::VARCHAR FROM read_parquet('${file}')`,
      );
      const rows = all.getRows().map(([eventId, receivedAt, payload]) => ({
        eventId,
        receivedAt,
        payload: JSON.parse(String(payload)) as unknown,
      }));
      expect(rows).toEqual(
        ndjson.map(({ eventId, receivedAt, payload }) => ({ eventId, receivedAt, payload })),
      );
      conn.closeSync();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('writes the Parquet file of small events byte for byte as from chunks of EXPORT_CHUNK_ROWS with no byte bound', async () => {
    const appId = (await makeApp(t.app)).id;
    const key = (await makeApiKey(t.app, [appId], ['events:export'])).key;
    // 12,000 small events: a row group of 10,000 rows (two chunks), then one of 2,000.
    await t.db.query(
      `INSERT INTO events (app_id, ts, received_at, event_name, event_id, is_test_mode, payload_json)
       SELECT $1, r, r, 'Small.event', 'small-' || g, false, format('{"step":%s}', g % 12)::json
         FROM (SELECT g, $2::timestamptz + g * interval '1 ms' AS r FROM generate_series(1, 12000) g) s`,
      [appId, new Date(base)],
    );
    const res = await exportOf(appId, key, 'parquet').buffer(true).parse(binary);
    expect(res.status).toBe(200);
    // The file as exports wrote it before the byte bounds: whole chunks of 5,000 rows.
    const repository = t.app.get(ExportRepository);
    const window = { appId, fromMs: base, toMs: base + HOUR, testMode: 'false' } as const;
    const secrets = t.app.get(CursorSecretRepository);
    const userKeys = new ExportUserKeys(await secrets.userKeySecret(), appId);
    const encoder = new ParquetEncoder(await secrets.cursorSecret(), appId, userKeys);
    const pieces: Uint8Array[] = [];
    let after: ExportPosition | null = null;
    for (;;) {
      const copy = await repository.copyChunk(window, after, 5000, new ChunkBuffers());
      const extent = copyExtent(copy);
      const group = encoder.add({ copy, ...extent, release: () => undefined });
      if (group) pieces.push(group);
      if (extent.rows < 5000 || !extent.last) break;
      after = extent.last;
    }
    pieces.push(encoder.finish());
    expect((res.body as Buffer).equals(Buffer.concat(pieces))).toBe(true);
  });

  it('closes a response that its client has not read for EXPORT_IDLE_TIMEOUT_MS, and frees the slot', async () => {
    // 1,500 events of 29 KB: 43 MB, far more than the sockets' buffers hold.
    const stalled = await largeApp(t, base, 1500);
    const { port } = listening(t);
    const path = `/api/v1/export?appId=${stalled.appId}&from=${base}&to=${base + HOUR}`;
    // The signal is the server's side of the connection closing: a client that reads nothing does
    // not read the end of the stream either.
    const closed = new Promise<void>((resolve) =>
      t.http.once('connection', (socket: Socket) => socket.once('close', () => resolve())),
    );
    const started = performance.now();
    let req: http.ClientRequest | undefined;
    const received = await new Promise<number>((resolve, reject) => {
      const get = http.get({ port, path, headers: bearer(stalled.key) }, (res) => {
        expect(res.statusCode).toBe(200);
        res.once('data', (part: Buffer) => {
          // From here on the client reads nothing: only the server can end the response.
          res.pause();
          resolve(part.length);
        });
        res.on('error', () => undefined);
      });
      get.on('error', (err) =>
        /socket hang up|aborted|ECONNRESET/.test(err.message) ? undefined : reject(err),
      );
      req = get;
    });
    await closed;
    // The client's side, paused, would never read the end: it is let go here.
    req?.destroy();
    expect(received).toBeGreaterThan(0);
    expect(performance.now() - started).toBeGreaterThanOrEqual(IDLE_TIMEOUT_MS);
    // The slot is free as soon as the response is closed: the key's next export is admitted.
    const next = await request(t.http)
      .get('/api/v1/export')
      .query({ appId: stalled.appId, from: base, to: base + 1 })
      .set(bearer(stalled.key));
    expect(next.status).toBe(200);
  }, 30_000);
});

describe('GET /api/v1/export and the key read budget', () => {
  const t = useTestApp({
    AUTH_FAILURE_LIMIT: '1000',
    READ_RATE_REQUESTS: '100000',
    READ_TIME_MS_PER_SECOND: String(READ_MS_PER_SECOND),
    EXPORT_SETTLE_MS: '1000',
  });
  const base = Date.now() - 2 * HOUR;

  it("charges an export's reads to its key: the key's reads get 429 while it runs past the budget, and the export still completes", async () => {
    // 10,000 events of 29 KB as Parquet: 290 MB read and encoded, more read time than the key's
    // burst of 1 s with room to spare. Half as many came within the burst in about one run of
    // three on a fast day of this machine, and the key was then never refused.
    const { appId, key } = await largeApp(t, base, 10_000);
    const { port } = listening(t);
    const path = `/api/v1/export?appId=${appId}&from=${base}&to=${base + HOUR}&format=parquet`;
    const exporting = new Promise<{ status: number; whole: boolean }>((resolve, reject) => {
      http
        .get({ port, path, headers: bearer(key) }, (res) => {
          let tail = Buffer.alloc(0);
          res.on('data', (part: Buffer) => (tail = Buffer.concat([tail, part]).subarray(-4)));
          // A Parquet file ends with its magic number once the footer is written.
          res.on('end', () => resolve({ status: res.statusCode!, whole: tail.toString() === 'PAR1' }));
          res.on('error', reject);
        })
        .on('error', reject);
    });
    let done = false;
    void exporting.finally(() => (done = true));
    let refused: request.Response | null = null;
    // A cheap read every 20 ms: a few ms each, far under the budget by themselves.
    while (!done && !refused) {
      const read = await request(t.http).get('/api/v1/events').query({ appId, limit: 1 }).set(bearer(key));
      if (read.status === 429) refused = read;
      else expect(read.status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(refused).not.toBeNull();
    expectProblem(refused!, 429, 'rate_limited');
    expect(Number(refused!.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(refused!.body).toMatchObject({ limitReadMsPerSecond: READ_MS_PER_SECOND });
    // Past the budget the export pauses rather than being cut: the file arrives whole.
    expect(await exporting).toEqual({ status: 200, whole: true });
  }, 120_000);
});
