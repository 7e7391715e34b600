// The write path's next lever, measured (`npm run bench -- --write-copy [--quick]`): the service's
// one `unnest` statement against the same write as a binary COPY of the stored columns, in one
// transaction after the dedup claims. Records the `writeCopy` section of
// bench/results/latest.json (quick.json with --quick).
//
// Both sides write the same rows from the same 4 connections, at 100- and 1,000-row statements:
//  - `unnest`: IngestRepository.insertBatches from the build, the statement ingest runs
//    (claims, insert, dirty marks and the commit-budget check, one round trip);
//  - `copy`: BEGIN; the claims (the same INSERT … ON CONFLICT over three arrays, returning the
//    fresh ids); `COPY events (…) FROM STDIN (FORMAT binary)` of the rows to store; the dirty
//    marks and the budget check; COMMIT. Five round trips. The COPY rows are the elements of the
//    build's own binary column arrays (columnArrays) laid out row by row, so both sides send the
//    same bytes per value; the budget check times the last statement only, where the service's
//    times its one statement.
// Rounds alternate the order (AB, BA, …), so that a machine that drifts weighs on both. Per side:
// rows/s, and CPU per row of the PostgreSQL cluster (backends that have exited included) and of
// this process (the load generator, which also lays out the COPY rows).
import path from 'node:path';
import { createRequire } from 'node:module';
import { clusterDir } from '../../src/database/embedded-pg.mjs';
import { ROOT, releaseStandalone } from '../lib/common.mjs';
import { saveResultsSection } from '../lib/report.mjs';
import { connect, dbCeiling, insertApps, recreateDatabase, withDatabase } from '../lib/db.mjs';
import { cli, clusterCpuSecondsWithExited, cpuSecondsOf, startServer } from '../lib/processes.mjs';
import { accepted, loadWritePath } from '../lib/write-path.mjs';

const DEDUP_WINDOW_MS = 7 * 86_400_000;
const COMMIT_BUDGET_MS = 5_000;

/** `write(client, appId, events)` for the COPY side, from the build's column and mark arrays. */
function copyWritePath(dist) {
  const load = createRequire(path.join(dist, 'src', 'ingest', 'ingest.repository.js'));
  const { INGEST_COLUMNS, columnArrays } = load('./ingest-columns.js');
  const { dirtyMarkArrays } = load('./dirty-marks.js');
  const { from: copyFrom } = load('pg-copy-streams');
  const names = INGEST_COLUMNS.map((c) => c.name);
  const at = (name) => names.indexOf(name);
  const claim = `INSERT INTO event_dedup AS d (app_id, event_id, seen_at)
    SELECT a, e, s FROM unnest($1::uuid[], $2::text[], $3::timestamptz[]) AS t(a, e, s)
     WHERE e IS NOT NULL ORDER BY a, e
    ON CONFLICT (app_id, event_id) DO UPDATE SET seen_at = EXCLUDED.seen_at
      WHERE EXCLUDED.seen_at - d.seen_at > $4::bigint * interval '1 millisecond'
    RETURNING d.event_id`;
  const marks = `INSERT INTO rollup_dirty (app_id, day, timezone)
    SELECT m.app_id, m.day::date, m.zone FROM unnest($1::uuid[], $2::text[], $3::text[]) AS m(app_id, day, zone)
     WHERE tally_ingest_in_time($4::bigint)`;
  const copy = `COPY events (${names.join(', ')}) FROM STDIN (FORMAT binary)`;
  const header = Buffer.concat([Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'), Buffer.alloc(8)]);
  const trailer = Buffer.from([0xff, 0xff]);

  /** Byte ranges of each element (its length word included) of a binary array. */
  const elements = (array) => {
    const n = array.readInt32BE(12);
    const out = new Array(n);
    let o = 20;
    for (let i = 0; i < n; i++) {
      const length = array.readInt32BE(o);
      const end = o + 4 + Math.max(length, 0);
      out[i] = [o, end];
      o = end;
    }
    return out;
  };
  /** The COPY data of the rows `keep` marks, each field as its array element. */
  const copyData = (arrays, keep) => {
    const ranges = arrays.map(elements);
    const fields = Buffer.alloc(2);
    fields.writeInt16BE(arrays.length);
    const parts = [header];
    for (let r = 0; r < keep.length; r++) {
      if (!keep[r]) continue;
      parts.push(fields);
      for (let c = 0; c < arrays.length; c++)
        parts.push(arrays[c].subarray(ranges[c][r][0], ranges[c][r][1]));
    }
    parts.push(trailer);
    return Buffer.concat(parts);
  };

  return async (client, appId, events) => {
    const receivedAt = Date.now();
    const rows = events.map((e, index) => accepted(e, index, receivedAt));
    const batches = [{ appId, receivedAt, events: rows }];
    const arrays = columnArrays({ batches, events: rows, batchOf: rows.map(() => 0) });
    await client.query('BEGIN');
    try {
      const claimed = await client.query({
        name: 'bench_copy_claim',
        text: claim,
        values: [arrays[at('app_id')], arrays[at('event_id')], arrays[at('received_at')], DEDUP_WINDOW_MS],
      });
      const fresh = new Set(claimed.rows.map((r) => r.event_id));
      const keep = rows.map((r) => r.eventId === null || fresh.has(r.eventId));
      const data = copyData(arrays, keep);
      await new Promise((resolve, reject) => {
        const stream = client.query(copyFrom(copy));
        stream.on('finish', resolve);
        stream.on('error', reject);
        stream.end(data);
      });
      await client.query({
        name: 'bench_copy_marks',
        text: marks,
        values: [...dirtyMarkArrays(batches), COMMIT_BUDGET_MS],
      });
      await client.query('COMMIT');
      return keep.reduce((n, k) => n + (k ? 1 : 0), 0);
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  };
}

/** Waits until the partition of today exists (the server's maintenance makes it at start). */
async function waitForPartitions(db) {
  for (let i = 0; i < 120; i++) {
    const { rows } = await db.query(
      `SELECT count(*)::int AS n FROM pg_inherits WHERE inhparent = 'events'::regclass`,
    );
    if (rows[0].n > 2) return;
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error('write-copy: no partitions of events after 60 s');
}

const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1];

export async function writeCopyMode({ dist, cluster, quick, log, stopCluster }) {
  const rounds = quick ? 2 : 6;
  const seconds = quick ? 1 : 5;
  await recreateDatabase(cluster.url, 'bench_write_copy');
  const url = withDatabase(cluster.url, 'bench_write_copy');
  await cli(dist, url, ['migrate']);
  const server = await startServer({ dist, databaseUrl: url });
  const db = await connect(url);
  const bySize = {};
  const pgData = path.join(await clusterDir(cluster.dir), 'pg');
  try {
    await waitForPartitions(db);
    await server.stop();
    const [appId] = await insertApps(db, 1, `write-copy-${Date.now().toString(36)}`);
    const sides = { unnest: loadWritePath(dist), copy: copyWritePath(dist) };
    for (const batchSize of [100, 1000]) {
      const runs = { unnest: [], copy: [] };
      for (let round = 0; round < rounds; round++) {
        for (const side of round % 2 === 0 ? ['unnest', 'copy'] : ['copy', 'unnest']) {
          const pg0 = clusterCpuSecondsWithExited(pgData);
          const me0 = cpuSecondsOf(process.pid);
          const { latencies: _l, ...run } = await dbCeiling({
            url,
            appId,
            connections: 4,
            seconds,
            batchSize,
            write: sides[side],
          });
          const pg = clusterCpuSecondsWithExited(pgData) - pg0;
          const me = cpuSecondsOf(process.pid) - me0;
          const figures = {
            rowsPerSec: Math.round(run.rowsPerSec),
            postgresUsPerRow: Math.round((pg * 1e7) / run.rows) / 10,
            loadGeneratorUsPerRow: Math.round((me * 1e7) / run.rows) / 10,
          };
          runs[side].push(figures);
          log(`write-copy ${batchSize}-row ${side}: ${JSON.stringify(figures)}`);
        }
      }
      const summary = (list) => ({
        rowsPerSec: median(list.map((r) => r.rowsPerSec)),
        postgresUsPerRow: median(list.map((r) => r.postgresUsPerRow)),
        loadGeneratorUsPerRow: median(list.map((r) => r.loadGeneratorUsPerRow)),
      });
      const unnest = summary(runs.unnest);
      const copy = summary(runs.copy);
      bySize[`rows${batchSize}`] = {
        unnest,
        copy,
        copyToUnnest: {
          rowsPerSec: Math.round((copy.rowsPerSec / unnest.rowsPerSec) * 1000) / 1000,
          postgresUsPerRow: Math.round((copy.postgresUsPerRow / unnest.postgresUsPerRow) * 1000) / 1000,
        },
        runs,
      };
    }
  } finally {
    await server.stop().catch(() => undefined);
    await db.end();
    await releaseStandalone({ dist, cluster, stopCluster });
  }
  const section = {
    timestamp: new Date().toISOString(),
    note: 'Medians of alternated rounds on a shared 2-core machine; CPU of the whole cluster.',
    connections: 4,
    secondsPerRun: seconds,
    rounds,
    ...bySize,
  };
  saveResultsSection(ROOT, 'writeCopy', section, quick ? 'quick.json' : 'latest.json');
  const { runs: _a, ...small100 } = section.rows100;
  const { runs: _b, ...small1000 } = section.rows1000;
  process.stdout.write(`${JSON.stringify({ rows100: small100, rows1000: small1000 }, null, 2)}\n`);
  return 0;
}
