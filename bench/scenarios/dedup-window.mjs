// What a longer dedup window costs (`npm run bench -- --dedup-window [--quick]`): the dedup table
// holds every eventId of the window, so a 30-day window holds about 4.3 times the rows of a 7-day
// one. Fills a table shaped as `event_dedup` (same columns, primary key and BRIN index) to the
// row counts of each window at a given daily volume, then times ingest's claim statement (100
// new ids per statement, ON CONFLICT DO NOTHING, as ingest writes them) and reads the table's
// size. Records the `dedupWindow` section of bench/results/latest.json (quick.json with --quick).
import { ROOT, releaseStandalone } from '../lib/common.mjs';
import { saveResultsSection } from '../lib/report.mjs';
import { connect, recreateDatabase, withDatabase } from '../lib/db.mjs';

const APP = '00000000-0000-4000-8000-000000000001';

async function fill(db, rows) {
  await db.query(`DROP TABLE IF EXISTS dedup_probe`);
  await db.query(`CREATE TABLE dedup_probe (
      app_id uuid NOT NULL, event_id text COLLATE "C" NOT NULL, seen_at timestamptz NOT NULL,
      PRIMARY KEY (app_id, event_id))`);
  await db.query(`CREATE INDEX dedup_probe_seen_at ON dedup_probe USING brin (seen_at)`);
  // UUID-like ids in random order, as SDKs make them.
  await db.query(
    `INSERT INTO dedup_probe SELECT $1, gen_random_uuid()::text, now() - (g % 30) * interval '1 day'
       FROM generate_series(1, $2) g`,
    [APP, rows],
  );
  await db.query(`VACUUM ANALYZE dedup_probe`);
}

async function timeClaims(db, statements) {
  const started = process.hrtime.bigint();
  for (let i = 0; i < statements; i++) {
    await db.query(
      `INSERT INTO dedup_probe (app_id, event_id, seen_at)
       SELECT $1, gen_random_uuid()::text, now() FROM generate_series(1, 100)
       ON CONFLICT DO NOTHING`,
      [APP],
    );
  }
  return Number(process.hrtime.bigint() - started) / 1e3 / (statements * 100);
}

export async function dedupWindowMode({ dist, cluster, quick, log, stopCluster }) {
  const perDay = quick ? 20_000 : 200_000;
  const statements = quick ? 200 : 2000;
  await recreateDatabase(cluster.url, 'bench_dedup');
  const db = await connect(withDatabase(cluster.url, 'bench_dedup'));
  const windows = {};
  try {
    for (const days of [7, 30]) {
      const rows = perDay * days;
      await fill(db, rows);
      const usPerEvent = await timeClaims(db, statements);
      const [{ bytes }] = (await db.query(`SELECT pg_total_relation_size('dedup_probe')::float8 AS bytes`))
        .rows;
      windows[`${days}d`] = {
        rows,
        tableMb: Math.round(bytes / 1048576),
        bytesPerRow: Math.round(bytes / rows),
        claimUsPerEvent: Math.round(usPerEvent * 100) / 100,
      };
      log(`dedup window ${days} days: ${JSON.stringify(windows[`${days}d`])}`);
    }
  } finally {
    await db.end();
    await releaseStandalone({ dist, cluster, stopCluster });
  }
  const section = {
    timestamp: new Date().toISOString(),
    eventsPerDay: perDay,
    ...windows,
    sizeRatio: Math.round((windows['30d'].tableMb / Math.max(1, windows['7d'].tableMb)) * 100) / 100,
    claimCostRatio: Math.round((windows['30d'].claimUsPerEvent / windows['7d'].claimUsPerEvent) * 100) / 100,
  };
  saveResultsSection(ROOT, 'dedupWindow', section, quick ? 'quick.json' : 'latest.json');
  process.stdout.write(`${JSON.stringify(section, null, 2)}\n`);
  return 0;
}
