import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import request from 'supertest';
import { asExported } from './support/databases';
import { DuckDBInstance } from '@duckdb/node-api';
import { bearer, makeApiKey, makeApp, makeIngestKey, makeTenant, postIngest } from './factories';
import { SeedEvent, seedEvents } from './factories/events';
import { useTestApp } from './support/test-app';
import { expectProblem } from './support/problem';
import { TallyReader } from '../packages/client/src/index';
import { ExportRepository } from '../src/export/export.repository';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const SETTLE_MS = 1_000;

interface ExportRecord {
  id: string;
  appId: string;
  anonymousUserId: string | null;
  eventId: string | null;
  receivedAt: number;
  floatValue: number | null;
  [field: string]: unknown;
}

const parseLines = (text: string): ExportRecord[] =>
  text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as ExportRecord);

/** Raw bytes of a response, for supertest. */
function binary(res: request.Response, callback: (err: Error | null, body: Buffer) => void) {
  const parts: Buffer[] = [];
  res.on('data', (part: Buffer) => parts.push(part));
  res.on('end', () => callback(null, Buffer.concat(parts)));
}

describe('GET /api/v1/export', () => {
  const t = useTestApp({
    AUTH_FAILURE_LIMIT: '1000',
    READ_RATE_REQUESTS: '100000',
    INGEST_RATE_REQUESTS: '100000',
    EXPORT_SETTLE_MS: String(SETTLE_MS),
    EXPORT_CHUNK_ROWS: '500',
    EXPORT_MAX_CONCURRENT: '4',
  });
  let tenant: Awaited<ReturnType<typeof makeTenant>>;
  let exportKey: string;
  const base = Date.now() - 2 * HOUR;
  const seeded: SeedEvent[] = [];

  beforeAll(async () => {
    tenant = await makeTenant(t.app);
    exportKey = (await makeApiKey(t.app, [tenant.appId], ['events:export'])).key;
    // 3,000 events over one hour of receive time; every tenth is late (event time days before).
    for (let i = 0; i < 3000; i++) {
      const receivedAt = base + Math.floor(i / 3) * 1000;
      seeded.push({
        eventName: i % 2 ? 'Checkout.completed' : 'App.opened',
        receivedAt,
        eventTime: i % 10 === 0 ? receivedAt - 3 * DAY : receivedAt - 500,
        eventId: `e-${i}`,
        anonymousUserId: `u-${i % 17}`,
        floatValue: i % 4 === 0 ? null : i / 8,
        payload: i % 5 === 0 ? null : { plan: i % 3 ? 'pro' : 'free', items: i % 7, gift: i % 2 === 0 },
        platform: 'ios',
      });
    }
    await seedEvents(t.db, tenant.appId, seeded);
  });

  const exportReq = (query: Record<string, string | number>, key = exportKey) =>
    request(t.http).get('/api/v1/export').query(query).set(bearer(key));

  const full = { from: base - 1000, to: base + HOUR };

  it('streams the window as NDJSON, ascending by receivedAt then id, with the fields of /events', async () => {
    const res = await exportReq({ appId: tenant.appId, ...full });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/x-ndjson; charset=utf-8');
    expect(res.headers['x-export-from']).toBe(String(full.from));
    expect(res.headers['x-export-to']).toBe(String(full.to));
    const records = parseLines(res.text);
    expect(records).toHaveLength(3000);
    expect(new Set(records.map((r) => r.eventId)).size).toBe(3000);
    // Record ids are opaque: the order (receivedAt, then stored id) is checked against the table.
    const stored = (await t.db.query(
      `SELECT event_id FROM events WHERE app_id = $1 AND received_at >= $2 AND received_at < $3
        ORDER BY received_at, id`,
      [tenant.appId, new Date(full.from), new Date(full.to)],
    )) as { event_id: string }[];
    expect(records.map((r) => r.eventId)).toEqual(stored.map((r) => r.event_id));
    // The same record as GET /api/v1/events gives.
    const reader = (await makeApiKey(t.app, [tenant.appId], ['events:read'])).key;
    const page = await request(t.http)
      .get('/api/v1/events')
      .query({ appId: tenant.appId, limit: 1 })
      .set(bearer(reader));
    const [newest] = await asExported(t.db, [page.body[0] as ExportRecord]);
    expect(records.find((r) => r.id === newest.id)).toEqual(newest);
  });

  it('writes each line byte for byte as GET /api/v1/events writes the record, awkward values included', async () => {
    const appId = (await makeApp(t.app)).id;
    const key = (await makeApiKey(t.app, [appId], ['events:export', 'events:read'])).key;
    const odd = 'quote " backslash \\ newline \n tab \t bell \u0007 unit \u001f é 😀 \u2028 </script>';
    const at = base + 10 * 60_000;
    const ids = await seedEvents(t.db, appId, [
      { eventName: odd, receivedAt: at, eventTime: at - 1, anonymousUserId: odd, floatValue: 1e-7 },
      { eventName: 'e', receivedAt: at + 1, eventTime: -86_400_001, ts: at, floatValue: 1e21, locale: '' },
      { eventName: 'e', receivedAt: at + 2, floatValue: 0.1, payload: { z: 1, a: odd, n: -0.5, b: true } },
      { eventName: 'e', receivedAt: at + 3, payload: { kept: 'as stored' } },
      { eventName: 'e', receivedAt: at + 4, platform: 'ios', timezone: 'Europe/Berlin' },
      { eventName: 'e', receivedAt: at + 5, floatValue: 5 },
    ]);
    // As ingest stores payloads now: the compact JSON text, beside the older jsonb column.
    await t.db.query(
      `UPDATE events SET payload_json = '{"k":"v","n":[1,2.5]}', payload = NULL WHERE id = $1`,
      [ids[3]],
    );
    await t.db.query(`UPDATE events SET float_value = '-0' WHERE id = $1`, [ids[4]]);
    await t.db.query(`UPDATE events SET float_value = 'NaN' WHERE id = $1`, [ids[5]]);
    const res = await request(t.http)
      .get('/api/v1/export')
      .query({ appId, from: at, to: at + 10 })
      .set(bearer(key));
    expect(res.status).toBe(200);
    const page = await request(t.http).get('/api/v1/events').query({ appId, limit: 10 }).set(bearer(key));
    expect(page.status).toBe(200);
    const expected = (await asExported(t.db, (page.body as ExportRecord[]).reverse()))
      .map((record) => JSON.stringify(record) + '\n')
      .join('');
    expect(res.text).toBe(expected);
    const records = parseLines(res.text);
    expect(records.map((r) => [r.eventName, r.floatValue, r.payload])).toEqual([
      [odd, 1e-7, null],
      ['e', 1e21, null],
      ['e', 0.1, { z: 1, a: odd, n: -0.5, b: true }],
      ['e', null, { k: 'v', n: [1, 2.5] }],
      ['e', 0, null],
      ['e', null, null],
    ]);
    expect(records[1]).toMatchObject({ eventTime: -86_400_001, timestamp: at, locale: '' });
  });

  it('honours Accept-Encoding: gzip with the same lines', async () => {
    const plain = await exportReq({ appId: tenant.appId, ...full });
    const path = `/api/v1/export?appId=${tenant.appId}&from=${full.from}&to=${full.to}`;
    const res = await rawGet(path, { ...bearer(exportKey), 'Accept-Encoding': 'gzip' });
    expect(res.status).toBe(200);
    expect(res.headers['content-encoding']).toBe('gzip');
    expect(res.headers['vary']).toMatch(/Accept-Encoding/);
    const body = res.body;
    expect(body.length).toBeLessThan(Buffer.byteLength(plain.text) / 3);
    expect(gunzipSync(body).toString('utf8')).toBe(plain.text);
  });

  it('resumes after a cut: after=<receivedAt>:<id> of the last complete line continues exactly', async () => {
    const whole = parseLines((await exportReq({ appId: tenant.appId, ...full })).text);
    const url = `/api/v1/export?appId=${tenant.appId}&from=${full.from}&to=${full.to}`;
    const partial = await readThenCut(url, 40_000);
    const complete = partial.slice(0, partial.lastIndexOf('\n') + 1);
    const head = parseLines(complete);
    expect(head.length).toBeGreaterThan(0);
    expect(head.length).toBeLessThan(3000);
    const last = head[head.length - 1];
    const rest = await untilAdmitted(() =>
      exportReq({ appId: tenant.appId, ...full, after: `${last.receivedAt}:${last.id}` }),
    );
    expect(rest.status).toBe(200);
    expect([...head, ...parseLines(rest.text)]).toEqual(whole);
  });

  it('writes Parquet that DuckDB reads back with the same rows as the NDJSON export', async () => {
    const ndjson = parseLines((await exportReq({ appId: tenant.appId, ...full })).text);
    const res = await exportReq({ appId: tenant.appId, ...full, format: 'parquet' })
      .buffer(true)
      .parse(binary);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/vnd.apache.parquet');
    const dir = mkdtempSync(join(tmpdir(), 'tally-export-'));
    try {
      const file = join(dir, 'events.parquet');
      writeFileSync(file, res.body as Buffer);
      const db = await DuckDBInstance.create(':memory:');
      const conn = await db.connect();
      const summary = await conn.runAndReadAll(
        `SELECT count(*)::INTEGER AS n, sum("floatValue") AS total,
                count(DISTINCT "eventId")::INTEGER AS ids, typeof(any_value("receivedAt")) AS ts_type,
                typeof(any_value("isTestMode")) AS bool_type
           FROM read_parquet('${file}')`,
      );
      const [n, total, ids, tsType, boolType] = summary.getRows()[0];
      expect(n).toBe(ndjson.length);
      expect(ids).toBe(ndjson.length);
      expect(total).toBeCloseTo(
        ndjson.reduce((s, r) => s + (r.floatValue ?? 0), 0),
        6,
      );
      expect(String(tsType)).toMatch(/^TIMESTAMP/);
      expect(boolType).toBe('BOOLEAN');
      const idRows = await conn.runAndReadAll(`SELECT "eventId" FROM read_parquet('${file}')`);
      expect(new Set(idRows.getRows().map((r) => r[0]))).toEqual(new Set(ndjson.map((r) => r.eventId)));
      const payload = await conn.runAndReadAll(
        `SELECT payload::VARCHAR FROM read_parquet('${file}') WHERE "eventId" = 'e-1'`,
      );
      expect(JSON.parse(String(payload.getRows()[0][0]))).toEqual(
        ndjson.find((r) => r.eventId === 'e-1')!.payload,
      );
      // Every field of every row, in the export's order, as the NDJSON records have it.
      const fields = Object.keys(ndjson[0]);
      const times = new Set(['eventTime', 'timestamp', 'receivedAt']);
      const columns = fields.map((f) =>
        times.has(f) ? `epoch_ms("${f}")::DOUBLE` : f === 'payload' ? 'payload::VARCHAR' : `"${f}"`,
      );
      const all = await conn.runAndReadAll(`SELECT ${columns.join(', ')} FROM read_parquet('${file}')`);
      const rows = all
        .getRows()
        .map((values) =>
          Object.fromEntries(
            fields.map((f, i) => [
              f,
              f === 'payload' && values[i] !== null ? JSON.parse(String(values[i])) : values[i],
            ]),
          ),
        );
      expect(rows).toEqual(ndjson);
      conn.closeSync();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reads no further ahead than the socket takes while the client does not read', async () => {
    const appId = (await makeApp(t.app)).id;
    const key = (await makeApiKey(t.app, [appId], ['events:export'])).key;
    // 60,000 events, about 28 MB of NDJSON: 120 chunks of 500, far more than socket buffers hold.
    await t.db.query(
      `INSERT INTO events (app_id, ts, received_at, event_name, event_id, is_test_mode, payload_json)
       SELECT $1, r, r, 'Bulk.loaded', 'bulk-' || g, false, '{"filler":"${'x'.repeat(200)}"}'
         FROM (SELECT g, $2::timestamptz + g * interval '1 ms' AS r FROM generate_series(1, 60000) g) s`,
      [appId, new Date(base)],
    );
    const reads = jest.spyOn(t.app.get(ExportRepository), 'copyChunk');
    try {
      const req = await openPaused(`/api/v1/export?appId=${appId}&from=${base}&to=${base + HOUR}`, key);
      // A second of a client that reads nothing: an export that ignored the socket's backpressure
      // reads all 120 chunks in well under that.
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const whilePaused = reads.mock.calls.length;
      expect(whilePaused).toBeGreaterThan(0);
      expect(whilePaused).toBeLessThan(60);
      req.destroy();
      // The export ends with its connection, and the key may start another.
      const next = await untilAdmitted(() =>
        request(t.http)
          .get('/api/v1/export')
          .query({ appId, from: base, to: base + 1 })
          .set(bearer(key)),
      );
      expect(next.status).toBe(200);
      const total = reads.mock.calls.length;
      // Time for a reader left running after its connection closed to show itself.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(reads.mock.calls.length).toBe(total);
    } finally {
      reads.mockRestore();
    }
  });

  it('answers 429 with Retry-After to a second export of the same key while the first runs', async () => {
    const url = `/api/v1/export?appId=${tenant.appId}&from=${full.from}&to=${full.to}`;
    const held = await openPaused(url);
    try {
      const second = await exportReq({ appId: tenant.appId, ...full });
      expectProblem(second, 429, 'rate_limited');
      expect(Number(second.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      // Another key is not held back.
      const other = (await makeApiKey(t.app, [tenant.appId], ['events:export'])).key;
      expect((await exportReq({ appId: tenant.appId, ...full }, other)).status).toBe(200);
    } finally {
      held.destroy();
    }
    expect((await untilAdmitted(() => exportReq({ appId: tenant.appId, ...full }))).status).toBe(200);
  });

  it('TallyReader.export resumes by itself after cuts and never yields a record twice', async () => {
    const whole = parseLines((await exportReq({ appId: tenant.appId, ...full })).text);
    const { port } = listening();
    let cuts = 0;
    // A fetch whose first three answers break off after 50 kB, as a dropped connection does.
    const cutting = (async (input: string | URL | Request, init?: RequestInit) => {
      const res = await fetch(input, init);
      if (!res.body || cuts >= 3) return res;
      cuts++;
      let sent = 0;
      const reader = res.body.getReader();
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          const { done, value } = await reader.read();
          if (done) return controller.close();
          sent += value.length;
          if (sent > 50_000) {
            await reader.cancel();
            return controller.error(new TypeError('terminated'));
          }
          controller.enqueue(value);
        },
      });
      return new Response(body, { status: res.status, headers: res.headers });
    }) as typeof fetch;
    const reader = new TallyReader({
      endpoint: `http://127.0.0.1:${port}`,
      apiKey: exportKey,
      fetch: cutting,
      sleep: () => new Promise((resolve) => setImmediate(resolve)),
      maxRetries: 50,
    });
    const got = [];
    for await (const record of reader.export({ appId: tenant.appId, from: full.from, to: full.to }))
      got.push(record);
    expect(cuts).toBe(3);
    expect(got).toEqual(whole);
  });

  describe('errors', () => {
    it('401 without a valid key', async () => {
      const res = await request(t.http).get('/api/v1/export').query({ appId: tenant.appId, from: full.from });
      expectProblem(res, 401, 'invalid_key');
      expect(res.headers['www-authenticate']).toMatch(/error="invalid_token"/);
    });

    it('403 insufficient_scope for a key without events:export', async () => {
      const res = await exportReq({ appId: tenant.appId, from: full.from }, tenant.apiKey);
      expectProblem(res, 403, 'insufficient_scope');
      expect(res.headers['www-authenticate']).toMatch(/scope="events:export"/);
    });

    it('403 app_forbidden for an app the key does not hold', async () => {
      const other = await makeApp(t.app);
      const res = await exportReq({ appId: other.id, from: full.from });
      expectProblem(res, 403, 'app_forbidden');
    });

    it('400 for a to past the export horizon', async () => {
      const res = await exportReq({ appId: tenant.appId, from: full.from, to: Date.now() });
      expectProblem(res, 400, 'invalid_query');
      expect(res.body.errors).toEqual([
        { field: 'to', code: 'out_of_range', message: expect.stringMatching(/horizon/) },
      ]);
    });

    it.each([
      [{}, 'from', 'required'],
      [{ from: 'yesterday' }, 'from', 'invalid_timestamp'],
      [{ from: '2026-11-21T10:00:00' }, 'from', 'invalid_timestamp'],
      [{ from: 1000, to: 'soon' }, 'to', 'invalid_timestamp'],
      [{ from: 2000, to: 1000 }, 'from', 'invalid_range'],
      [{ from: 1000, after: 'abc' }, 'after', 'invalid_format'],
      [{ from: 1000, after: '123:' }, 'after', 'invalid_format'],
      [{ from: 1000, after: '123:x' }, 'after', 'invalid_format'],
      [{ from: 1000, format: 'csv' }, 'format', 'invalid_value'],
      [{ from: 1000, limit: 10 }, 'limit', 'unknown_parameter'],
    ])('400 invalid_query for %j (%s: %s)', async (query, field, code) => {
      const res = await exportReq({ appId: tenant.appId, ...query });
      expectProblem(res, 400, 'invalid_query');
      expect(res.body.errors).toEqual([{ field, code, message: expect.any(String) }]);
    });
  });

  describe('exactly once across windows', () => {
    it('gives every event once over consecutive windows exported while ingest runs, late events included', async () => {
      const appId = (await makeApp(t.app)).id;
      const ingestKey = (await makeIngestKey(t.app, appId)).key;
      const key = (await makeApiKey(t.app, [appId], ['events:export'])).key;
      const sent = new Set<string>();
      let lastServerTime = 0;
      let ingesting = true;
      const ingest = (async () => {
        for (let batch = 0; batch < 40; batch++) {
          const events = Array.from({ length: 50 }, (_, i) => {
            const eventId = `w-${batch}-${i}`;
            // Every fifth event is late: its event time lies days back, in an older partition.
            return { eventName: 'Sync.tick', eventId, eventTime: Date.now() - (i % 5 === 0 ? 4 * DAY : 0) };
          });
          const res = await postIngest(t.http, ingestKey, { events });
          expect(res.status).toBe(200);
          expect(res.body.accepted).toBe(50);
          events.forEach((e) => sent.add(e.eventId));
          lastServerTime = res.body.serverTime as number;
        }
        ingesting = false;
      })();
      const seen: string[] = [];
      let from = Date.now() - HOUR;
      let windows = 0;
      // Each window ends at the horizon of its moment and the next starts there; stop once the
      // horizon has passed the last event received.
      while (ingesting || from <= lastServerTime) {
        const res = await request(t.http).get('/api/v1/export').query({ appId, from }).set(bearer(key));
        expect(res.status).toBe(200);
        seen.push(...parseLines(res.text).map((r) => r.eventId!));
        from = Number(res.headers['x-export-to']);
        windows++;
      }
      await ingest;
      expect(windows).toBeGreaterThan(2);
      expect(seen).toHaveLength(sent.size);
      expect(new Set(seen)).toEqual(sent);
    });
  });

  /** Reads `url` as the export key until `bytes` arrived, then cuts the connection. */
  function readThenCut(path: string, bytes: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const { port } = listening();
      const req = http.get({ port, path, headers: bearer(exportKey) }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (part: string) => {
          text += part;
          if (text.length >= bytes) {
            req.destroy();
            resolve(text);
          }
        });
        res.on('end', () => resolve(text));
      });
      req.on('error', (err) => (err.message === 'socket hang up' ? undefined : reject(err)));
    });
  }

  /** A GET whose body is left as sent (supertest would decompress it). */
  function rawGet(path: string, headers: Record<string, string>) {
    return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }>(
      (resolve, reject) => {
        const { port } = listening();
        http
          .get({ port, path, headers }, (res) => {
            const parts: Buffer[] = [];
            res.on('data', (part: Buffer) => parts.push(part));
            res.on('end', () =>
              resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(parts) }),
            );
          })
          .on('error', reject);
      },
    );
  }

  /** Starts an export and stops reading it after its first bytes, so that it stays running. */
  function openPaused(path: string, key = exportKey): Promise<http.ClientRequest> {
    return new Promise((resolve, reject) => {
      const { port } = listening();
      const req = http.get({ port, path, headers: bearer(key) }, (res) => {
        expect(res.statusCode).toBe(200);
        res.once('data', () => {
          res.pause();
          resolve(req);
        });
      });
      req.on('error', (err) => (err.message === 'socket hang up' ? undefined : reject(err)));
    });
  }

  function listening(): AddressInfo {
    if (!t.http.listening) t.http.listen(0);
    return t.http.address() as AddressInfo;
  }

  /** Repeats a request while it is turned away because the key's previous export is still ending. */
  async function untilAdmitted(send: () => request.Test): Promise<request.Response> {
    for (let attempt = 0; attempt < 200; attempt++) {
      const res = await send();
      if (res.status !== 429) return res;
      // Pacing between attempts, not a condition.
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    throw new Error('the previous export never released its slot');
  }
});
