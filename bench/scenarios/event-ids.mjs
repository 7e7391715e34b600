// Time-ordered (UUIDv7) against random (UUIDv4) eventIds: what each costs PostgreSQL on the write
// path. `npm run build && node bench/scenarios/event-ids.mjs [--prefill 2000000] [--events 200000]`
//
// Each kind gets its own app whose dedup records are first filled with `prefill` ids of that kind
// (a week of traffic, as the dedup window keeps), then `events` new events are written through
// the service's own IngestRepository from 4 connections in 100-event statements, twice per kind,
// alternating (random, v7, random, v7), each after a CHECKPOINT. Per event: PostgreSQL CPU (from
// /proc), WAL bytes and full-page images (pg_stat_wal), and the dedup index's growth. The WAL
// figures are deterministic; the CPU figures vary with the machine's load.
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ensure, stop } from '../../src/database/embedded-pg.mjs';
import { batchTemplate } from '../lib/events.mjs';
import { connect, insertApps, recreateDatabase, withDatabase } from '../lib/db.mjs';
import { cli, clusterCpuSeconds, freePort } from '../lib/processes.mjs';
import { loadWritePath } from '../lib/write-path.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const { values: opts } = parseArgs({
  options: {
    prefill: { type: 'string', default: '2000000' },
    events: { type: 'string', default: '200000' },
    // e.g. --wal-compression pglz: the same runs with compressed full-page images.
    'wal-compression': { type: 'string', default: 'off' },
  },
});
const PREFILL = Number(opts.prefill);
const EVENTS = Number(opts.events);
const log = (m) => process.stderr.write(`[event-ids] ${m}\n`);

/** RFC 9562 UUIDv7: 48 bits of epoch ms, version 7, 74 random bits. */
export function uuidv7(ms = Date.now()) {
  const b = randomBytes(16);
  b.writeUIntBE(ms, 0, 6);
  b[6] = (b[6] & 0x0f) | 0x70;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

const KINDS = { random: () => randomUUID(), v7: () => uuidv7() };

async function walStats(db) {
  const { rows } = await db.query('SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal');
  return {
    records: Number(rows[0].wal_records),
    fpi: Number(rows[0].wal_fpi),
    bytes: Number(rows[0].wal_bytes),
  };
}

async function indexBytes(db) {
  const { rows } = await db.query(`SELECT pg_relation_size('event_dedup_pkey') AS n`);
  return Number(rows[0].n);
}

async function main() {
  const dist = path.join(ROOT, 'dist');
  const write = loadWritePath(dist);
  if (!write) throw new Error('no build: run `npm run build` first');
  // A cluster of its own, so that this never stops the one the main benchmark is using.
  const dir = path.join(ROOT, 'bench', '.cache', 'pg-ids');
  fs.mkdirSync(dir, { recursive: true });
  const cluster = await ensure(dir, await freePort());
  const url = withDatabase(cluster.url, 'bench_ids');
  await recreateDatabase(cluster.url, 'bench_ids');
  await cli(dist, url, ['migrate']);
  const db = await connect(url);
  const pgDir = path.join(dir, 'pg');
  const results = { prefill: PREFILL, events: EVENTS, walCompression: opts['wal-compression'], runs: [] };
  try {
    // The day partitions the server's maintenance task would have made.
    for (const offset of [-1, 0, 1]) {
      const day = new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
      const next = new Date(Date.parse(day) + 86_400_000).toISOString().slice(0, 10);
      await db.query(
        `CREATE TABLE IF NOT EXISTS events_p${day.replace(/-/g, '')} PARTITION OF events
           FOR VALUES FROM ('${day} 00:00:00+00') TO ('${next} 00:00:00+00')`,
      );
    }
    const apps = {};
    for (const kind of Object.keys(KINDS)) {
      [apps[kind]] = await insertApps(db, 1, `ids-${kind}`);
      // A week of earlier traffic: v7 ids carry their (older) time, random ones are random.
      const id =
        kind === 'v7'
          ? `lpad(to_hex((extract(epoch FROM now())*1000)::bigint - 7*86400000 + g*(7*86400000/$2::bigint)), 12, '0')`
          : `substr(md5(g::text || random()::text), 1, 12)`;
      await db.query(
        `INSERT INTO event_dedup (app_id, event_id, seen_at)
         SELECT $1, overlay(gen_random_uuid()::text PLACING
                  substr(${id}, 1, 8) || '-' || substr(${id}, 9, 4) FROM 1 FOR 13),
                now() - interval '7 days' + g * (interval '7 days' / $2::bigint)
           FROM generate_series(1, $2::bigint) AS g`,
        [apps[kind], PREFILL],
      );
      log(`prefilled ${PREFILL} ${kind} ids`);
    }
    await db.query('VACUUM ANALYZE event_dedup');
    await db.query(`ALTER SYSTEM SET wal_compression = '${opts['wal-compression'].replace(/'/g, '')}'`);
    await db.query('SELECT pg_reload_conf()');
    const templates = Array.from(
      { length: 16 },
      (_, i) => JSON.parse(batchTemplate(500 + i, 100).render('t')).events,
    );
    for (const kind of ['random', 'v7', 'random', 'v7']) {
      await db.query('CHECKPOINT');
      const clients = await Promise.all([0, 1, 2, 3].map(() => connect(url)));
      const wal0 = await walStats(db);
      const idx0 = await indexBytes(db);
      const cpu0 = clusterCpuSeconds(pgDir);
      const t0 = process.hrtime.bigint();
      let next = 0;
      let rows = 0;
      await Promise.all(
        clients.map(async (client, c) => {
          for (let i = c; next < EVENTS; i += 4) {
            next += 100;
            const events = templates[i % 16].map((e) => ({ ...e, eventId: KINDS[kind]() }));
            const written = await write(client, apps[kind], events);
            rows += written;
          }
        }),
      );
      const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
      const cpu = clusterCpuSeconds(pgDir) - cpu0;
      const wal1 = await walStats(db);
      const idx1 = await indexBytes(db);
      await Promise.all(clients.map((c) => c.end()));
      const run = {
        kind,
        rows,
        rowsPerSec: Math.round(rows / seconds),
        postgresCpuUsPerEvent: Math.round((cpu / rows) * 1e7) / 10,
        walBytesPerEvent: Math.round((wal1.bytes - wal0.bytes) / rows),
        walFpiPer1000Events: Math.round(((wal1.fpi - wal0.fpi) / rows) * 1000),
        dedupIndexBytesPerEvent: Math.round((idx1 - idx0) / rows),
      };
      results.runs.push(run);
      log(JSON.stringify(run));
    }
  } catch (err) {
    log(`failed: ${err.stack ?? err}`);
    process.exitCode = 1;
  } finally {
    await db.query('ALTER SYSTEM RESET wal_compression').catch(() => undefined);
    await db.end();
    await stop(dir);
  }
  const suffix = opts['wal-compression'] === 'off' ? '' : `-wal-${opts['wal-compression']}`;
  const file = path.join(ROOT, 'bench', 'results', `event-ids${suffix}.json`);
  fs.writeFileSync(file, JSON.stringify(results, null, 2) + '\n');
  log(`results: ${path.relative(ROOT, file)}`);
}

main().catch((err) => {
  process.stderr.write(`${err.stack ?? err}\n`);
  process.exit(1);
});
