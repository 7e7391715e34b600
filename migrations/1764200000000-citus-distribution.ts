import { MigrationInterface, QueryRunner } from 'typeorm';
import {
  distributeByApp,
  dropLocalCopies,
  hasCitus,
  referenceTables,
  sequentialCitusTransaction,
} from './citus';

/** Small tables every instance reads whole or joins with any app's rows: a copy on every node. */
export const REFERENCE_TABLES = ['apps', 'keys', 'server_secrets'];

/**
 * Tables of per-app rows, `events` first: distributed by `app_id` and co-located, so that an
 * app's events, dedup records, dirty marks, rollups, plans, quarantine, deletions and
 * suppressions sit on one worker.
 */
export const APP_TABLES = [
  'events',
  'event_dedup',
  'rollup_dirty',
  'rollups',
  'rollups_rezone',
  'rollup_rezone_jobs',
  'tracking_plans',
  'plan_quality_daily',
  'plan_rule_daily',
  'quarantine',
  'quarantine_days',
  'deletions',
  'user_suppressions',
];

/**
 * On a Citus coordinator (the `citus` extension installed in the database, the workers added),
 * distributes Tally's tables: see migrations/citus.ts. The audit log and the migrations table stay
 * local to the coordinator. A database that already holds data (a single node converted to
 * Citus) has its rows moved to the workers. On a plain PostgreSQL this migration does nothing.
 */
export class CitusDistribution1764200000000 implements MigrationInterface {
  name = 'CitusDistribution1764200000000';

  async up(q: QueryRunner): Promise<void> {
    if (!(await hasCitus(q))) return;
    await sequentialCitusTransaction(q);
    // Citus refuses a primary key without the distribution column; a deletion is still found by
    // its id alone (a query of every shard), and by app and id on its own shard.
    await q.query(`ALTER TABLE deletions DROP CONSTRAINT deletions_pkey, ADD PRIMARY KEY (app_id, id)`);
    await referenceTables(q, REFERENCE_TABLES);
    await distributeByApp(q, APP_TABLES);
    await dropLocalCopies(q, [...REFERENCE_TABLES, ...APP_TABLES]);
    // Ingest's statement runs on the worker that holds the app (src/ingest/ingest.repository.ts),
    // and ends with this check: every node needs it.
    await q.query(`SELECT create_distributed_function('tally_ingest_in_time(bigint)')`);
  }

  async down(q: QueryRunner): Promise<void> {
    if (!(await hasCitus(q))) return;
    await sequentialCitusTransaction(q);
    for (const table of [...APP_TABLES].reverse()) {
      await q.query(`SELECT undistribute_table($1)`, [table]);
    }
    for (const table of REFERENCE_TABLES) {
      await q.query(`SELECT undistribute_table($1, cascade_via_foreign_keys => true)`, [table]);
    }
    await q.query(`ALTER TABLE deletions DROP CONSTRAINT deletions_pkey, ADD PRIMARY KEY (id)`);
  }
}
