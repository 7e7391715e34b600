// Every migration's `down`, on a database with rows in it: up, down to zero, up again, and the
// schema must be the one a fresh `up` makes. Generic over MIGRATIONS: a new migration joins by
// being listed there.
import { DataSource } from 'typeorm';
import { MIGRATIONS } from '@migrations/index';
import { createDataSource } from '@app/database/data-source';
import { runMigrations } from '@app/database/migrate';
import { PartitionRepository } from '@app/storage/partition.repository';
import { otherDatabase, recreateDatabase } from './support/databases';

const DAY = 86_400_000;

/**
 * What the migrations made, as sorted text: tables and their kind, columns, indexes, constraints,
 * triggers, functions, sequences, types and extensions. The migrations table and the day partitions
 * of events are left out.
 */
async function catalog(db: DataSource): Promise<Record<string, string[]>> {
  const lines = async (sql: string) =>
    ((await db.query(sql)) as { line: string }[]).map((r) => r.line).sort();
  const inPublic = `n.nspname = 'public'`;
  // Day partitions are made at run time, not by migrations (and go with their parent).
  const ownTable = `c.relkind IN ('r', 'p', 'v', 'm') AND NOT c.relispartition AND c.relname <> 'migrations'`;
  return {
    tables: await lines(`
      SELECT c.relname || ' ' || c.relkind::text || ' ' || coalesce(pg_get_partkeydef(c.oid), '') AS line
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE ${inPublic} AND ${ownTable}`),
    columns: await lines(`
      SELECT c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
             || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
             || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
             || coalesce(' collate ' || co.collname, '') AS line
        FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        LEFT JOIN pg_collation co ON co.oid = a.attcollation AND a.attcollation <> 0
             AND co.collname <> 'default'
       WHERE ${inPublic} AND ${ownTable}
         AND a.attnum > 0 AND NOT a.attisdropped`),
    indexes: await lines(`
      SELECT pg_get_indexdef(i.indexrelid) AS line
        FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE ${inPublic} AND ${ownTable}`),
    constraints: await lines(`
      SELECT c.relname || ' ' || k.conname || ' ' || pg_get_constraintdef(k.oid) AS line
        FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE ${inPublic} AND ${ownTable}`),
    triggers: await lines(`
      SELECT pg_get_triggerdef(t.oid) AS line
        FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE ${inPublic} AND ${ownTable} AND NOT t.tgisinternal`),
    functions: await lines(`
      SELECT pg_get_functiondef(p.oid) AS line
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
       WHERE ${inPublic} AND p.prokind IN ('f', 'p')
         AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')`),
    sequences: await lines(`
      SELECT c.relname AS line FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE ${inPublic} AND c.relkind = 'S' AND c.relname NOT LIKE 'migrations%'`),
    types: await lines(`
      SELECT t.typname AS line FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
       WHERE ${inPublic} AND t.typtype IN ('e', 'd', 'c')
         AND NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = t.typrelid AND c.relkind <> 'c')`),
    extensions: await lines(`SELECT extname AS line FROM pg_extension WHERE extname <> 'plpgsql'`),
  };
}

/** Rows in every table the first migration makes, in partitions of two days. */
async function seed(db: DataSource): Promise<void> {
  const now = Date.now();
  const partitions = new PartitionRepository(db);
  await partitions.create(new Date(now), { lookups: true });
  await partitions.create(new Date(now - DAY));
  const app = '0190a8d2-0000-7000-8000-000000000001';
  await db.query(`INSERT INTO apps (id, name, pii_secret) VALUES ($1, 'Round trip', '\\x00')`, [app]);
  await db.query(
    `INSERT INTO keys (id, kind, mode, app_ids, key_hash, key_last4)
     VALUES ('0190a8d2-0000-7000-8000-000000000002', 'ingest', 'live', ARRAY[$1::uuid], '\\x01', 'abcd')`,
    [app],
  );
  for (const at of [now, now - DAY]) {
    await db.query(
      `INSERT INTO events (app_id, ts, received_at, event_time, event_name, event_id, anonymous_user_id,
                           session_id, is_test_mode, float_value, payload)
       SELECT $1::uuid, $2::timestamptz, $2::timestamptz, $3::bigint, 'Round.trip', 'e' || g || '-' || $3::bigint, 'u' || g,
              's' || g, g % 2 = 0, g * 0.5, jsonb_build_object('n', g)
         FROM generate_series(1, 200) AS g`,
      [app, new Date(at).toISOString(), at],
    );
    await db.query(`INSERT INTO event_dedup (app_id, event_id, seen_at) VALUES ($1, $2, now())`, [
      app,
      `d${at}`,
    ]);
  }
  await db.query(`INSERT INTO rollup_dirty (app_id, day) VALUES ($1, current_date)`, [app]);
  await db.query(
    `INSERT INTO rollups (app_id, day, is_test_mode, event_name, events, unique_users, unique_sessions,
                          fv_count, computed_at)
     VALUES ($1, current_date, false, 'Round.trip', 200, 200, 200, 0, now())`,
    [app],
  );
}

async function applied(db: DataSource): Promise<number> {
  const [{ n }] = (await db.query(`SELECT count(*)::int AS n FROM migrations`)) as { n: number }[];
  return n;
}

/** The catalog after each migration of a fresh database: [0] before the first, [n] after the n-th. */
async function catalogsStepByStep(db: DataSource): Promise<Record<string, string[]>[]> {
  const steps = [await catalog(db)];
  for (const Migration of MIGRATIONS) {
    const migration = new Migration();
    // As the runner does: in a transaction unless the migration opts out (`transaction = false`).
    const inTransaction = (migration as { transaction?: boolean }).transaction !== false;
    const runner = db.createQueryRunner();
    if (inTransaction) await runner.startTransaction();
    await migration.up(runner);
    if (inTransaction) await runner.commitTransaction();
    await runner.release();
    steps.push(await catalog(db));
  }
  return steps;
}

describe('migrations: up, down to zero, up again', () => {
  const fresh = createDataSource({ url: otherDatabase('tally_migrations_fresh'), poolSize: 2 });
  const trip = createDataSource({ url: otherDatabase('tally_migrations_trip'), poolSize: 2 });

  beforeAll(async () => {
    await recreateDatabase('tally_migrations_fresh');
    await recreateDatabase('tally_migrations_trip');
    await fresh.initialize();
    await trip.initialize();
  });
  afterAll(async () => {
    await fresh.destroy();
    await trip.destroy();
  });

  it(`undoes each of the ${MIGRATIONS.length} migrations with rows present, back to the schema before it, and up again`, async () => {
    const expected = await catalogsStepByStep(fresh);
    const last = expected[MIGRATIONS.length];
    expect(last.tables.length * last.columns.length * last.indexes.length).toBeGreaterThan(0);

    expect(await runMigrations(trip)).toHaveLength(MIGRATIONS.length);
    expect(await catalog(trip)).toEqual(last);
    await seed(trip);
    for (let left = MIGRATIONS.length; left > 0; left--) {
      await trip.undoLastMigration({ transaction: 'each' });
      expect(await applied(trip)).toBe(left - 1);
      // Named, so that a failure says which down left the schema wrong.
      expect({ after: `down of ${MIGRATIONS[left - 1].name}`, schema: await catalog(trip) }).toEqual({
        after: `down of ${MIGRATIONS[left - 1].name}`,
        schema: expected[left - 1],
      });
    }

    expect(await runMigrations(trip)).toHaveLength(MIGRATIONS.length);
    expect(await catalog(trip)).toEqual(last);
  });
});
