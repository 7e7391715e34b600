/* global fetch, performance */
// `npm run bench -- --backup [--backup-events N]`: `tally backup` and `tally restore` of the
// embedded cluster. Written to the `backup` section of bench/results/latest.json (the rest is kept).
//
// An embedded PostgreSQL in a temporary folder, N events of one app (default 2,000,000) stored as
// the export benchmark stores its big day, and a server on it. Measured:
//  - another app's ingest rate (4 clients, 100-event batches) alone, then while `tally backup` runs;
//  - the backup's time and size, against the database's size (pg_database_size) and the cluster's
//    files (without WAL);
//  - `tally restore` of that backup into a new cluster: its time, and the events found there.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { destroy, ensure, makeTemporaryDir, stop as stopCluster } from '../../src/database/embedded-pg.mjs';
import { connect } from '../lib/db.mjs';
import { freePort, startServer } from '../lib/processes.mjs';
import { flags, snapshotDist } from '../lib/common.mjs';
import { prepare } from './export.mjs';

const run = promisify(execFile);

/** Runs the CLI on the embedded cluster of `dir` (no DATABASE_URL): its parsed --json and its time. */
async function tallyEmbedded(dist, dir, port, args) {
  const started = performance.now();
  const { stdout } = await run(process.execPath, [`${dist}/src/cli/main.js`, ...args, '--json'], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      EMBEDDED_PG_DIR: dir,
      EMBEDDED_PG_PORT: String(port),
      ERASURE_LEDGER_PATH: `${dir}-ledger.ndjson`,
      LOG_LEVEL: 'warn',
    },
    timeout: 1_800_000,
    maxBuffer: 16 * 1024 * 1024,
  });
  return { result: JSON.parse(stdout), seconds: (performance.now() - started) / 1000 };
}

let sent = 0;

/** Another app's ingest from 4 clients until `until()` is true: accepted events/s. */
async function ingestLoad(base, key, until) {
  const started = performance.now();
  let accepted = 0;
  let failed = 0;
  const statuses = {};
  const worker = async () => {
    while (!until()) {
      const events = Array.from({ length: 100 }, () => ({ eventName: 'Load.tick', eventId: `b-${sent++}` }));
      const res = await fetch(`${base}/api/ingest`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ events }),
      });
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
      if (res.ok) accepted += (await res.json()).accepted;
      else {
        failed++;
        await res.arrayBuffer();
      }
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  return { eventsPerSec: accepted / ((performance.now() - started) / 1000), failed, statuses };
}

async function sizes(url, dir) {
  const client = await connect(url);
  try {
    const { rows } = await client.query(
      `SELECT pg_database_size(current_database())::float8 AS db, (SELECT count(*)::float8 FROM events) AS events`,
    );
    return { databaseBytes: rows[0].db, events: rows[0].events, dir };
  } finally {
    await client.end();
  }
}

async function measure({ dist, server, url, dir, port, total, log }) {
  const { ingestKey } = await prepare({ server: { ...server, dist }, url, total, log });
  const out = path.join(await makeTemporaryDir('bench-backup-out'), 'backup');
  let deadline = performance.now() + 10_000;
  const alone = await ingestLoad(server.baseUrl, ingestKey, () => performance.now() > deadline);
  log(`backup: another app alone ${Math.round(alone.eventsPerSec)} events/s; backing up`);
  const before = await sizes(url, dir);
  const pause = flags['backup-pause'] === undefined ? [] : ['--pause-percent', flags['backup-pause']];
  let backingUp = true;
  const during = ingestLoad(server.baseUrl, ingestKey, () => !backingUp);
  const backup = await tallyEmbedded(dist, dir, port, ['backup', '--out', out, ...pause]).finally(
    () => (backingUp = false),
  );
  const duringBackup = await during;
  log(
    `backup: ${backup.seconds.toFixed(1)} s, ${(backup.result.bytes / 1_048_576).toFixed(0)} MB; restoring`,
  );
  const target = await makeTemporaryDir('bench-backup-restore');
  const targetPort = await freePort();
  try {
    const restore = await tallyEmbedded(dist, target, targetPort, ['restore', '--from', out]);
    log(`backup: restore ${restore.seconds.toFixed(1)} s, ${restore.result.events} events`);
    return {
      events: before.events,
      databaseBytes: before.databaseBytes,
      backup: {
        seconds: backup.seconds,
        bytes: backup.result.bytes,
        format: backup.result.format,
        pausePercent: flags['backup-pause'] === undefined ? 'default' : Number(flags['backup-pause']),
      },
      backupVsDatabase: backup.result.bytes / before.databaseBytes,
      restore: { seconds: restore.seconds, eventsFound: restore.result.events },
      otherAppIngest: {
        aloneEventsPerSec: alone.eventsPerSec,
        duringBackupEventsPerSec: duringBackup.eventsPerSec,
        ratio: duringBackup.eventsPerSec / alone.eventsPerSec,
        statusesAlone: alone.statuses,
        statusesDuringBackup: duringBackup.statuses,
      },
    };
  } finally {
    await destroy(target).catch(() => undefined);
    fs.rmSync(`${target}-ledger.ndjson`, { force: true });
    fs.rmSync(path.dirname(out), { recursive: true, force: true });
  }
}

/** Targets of the backup (docs/operations.md, "Backups"). */
export const BACKUP_TARGETS = { ingestRatio: 0.8 };

export async function backupBenchmarkMain({ root, log, git }) {
  const total = Number(flags['backup-events'] ?? 2_000_000);
  const dist = await snapshotDist();
  const dir = await makeTemporaryDir('bench-backup');
  const port = await freePort();
  const { url } = await ensure(dir, port);
  let server;
  try {
    // The server attaches to the embedded cluster as `npm start` does (no DATABASE_URL): the
    // CLI's backup then leaves the cluster running when it exits.
    server = await startServer({
      dist,
      databaseUrl: undefined,
      env: {
        EMBEDDED_PG_DIR: dir,
        EMBEDDED_PG_PORT: String(port),
        ERASURE_LEDGER_PATH: `${dir}-ledger.ndjson`,
      },
    });
    const figures = await measure({ dist, server, url, dir, port, total, log });
    const section = {
      timestamp: new Date().toISOString(),
      commit: git(['rev-parse', 'HEAD']),
      ...figures,
      targets: { otherAppIngest: figures.otherAppIngest.ratio >= BACKUP_TARGETS.ingestRatio },
    };
    const file = path.join(root, 'bench', 'results', 'latest.json');
    const latest = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : {};
    latest.backup = section;
    fs.writeFileSync(file, JSON.stringify(latest, null, 2) + '\n');
    process.stdout.write(JSON.stringify(section, null, 2) + '\n');
    return 0;
  } finally {
    await server?.stop();
    await stopCluster(dir);
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(`${dir}-ledger.ndjson`, { force: true });
    fs.rmSync(dist, { recursive: true, force: true });
  }
}
