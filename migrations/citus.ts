import type { QueryRunner } from 'typeorm';

/**
 * Distribution on a Citus cluster (docs/architecture.md, "Tables on Citus"). On a plain
 * PostgreSQL every function here does nothing, so a migration can call them unconditionally.
 *
 * - Tables with a row per app (a column `app_id` in every primary key and unique index) are
 *   distributed by `app_id` and co-located with `events`, so that every statement about one app
 *   runs on the one worker that holds the app.
 * - Small tables that every instance reads whole, or joins with any app's rows, are reference
 *   tables: a copy on every node.
 * - Everything else stays a local table of the coordinator (the audit log, the migrations table).
 */

/** Whether the database is a Citus coordinator: the `citus` extension is installed in it. */
export async function hasCitus(q: QueryRunner): Promise<boolean> {
  const [row] = (await q.query(
    `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AS citus`,
  )) as { citus: boolean }[];
  return row.citus;
}

/**
 * Whether `table` is distributed or a reference table already. A table with a foreign key to a
 * reference table that is still local becomes a Citus "local" table when the reference table is
 * made: that one still has to be distributed.
 */
async function isCitusTable(q: QueryRunner, table: string): Promise<boolean> {
  const [row] = (await q.query(
    `SELECT EXISTS (SELECT 1 FROM citus_tables
                     WHERE table_name = to_regclass($1) AND citus_table_type <> 'local') AS known`,
    [table],
  )) as { known: boolean }[];
  return row.known;
}

/**
 * Citus distributes tables that reference a reference table over one connection per worker only
 * when the transaction is sequential; the migration's transaction creates both.
 */
export async function sequentialCitusTransaction(q: QueryRunner): Promise<void> {
  await q.query(`SET LOCAL citus.multi_shard_modify_mode TO 'sequential'`);
}

/** Makes each of `tables` a reference table, unless it is one already. */
export async function referenceTables(q: QueryRunner, tables: string[]): Promise<void> {
  for (const table of tables) {
    if (await isCitusTable(q, table)) continue;
    await q.query(`SELECT create_reference_table($1)`, [table]);
  }
}

/**
 * Distributes each of `tables` by `app_id`, co-located with `events` (`events` itself first), unless
 * it is distributed already. Rows a table already holds are moved to the workers.
 */
export async function distributeByApp(q: QueryRunner, tables: string[]): Promise<void> {
  for (const table of tables) {
    if (await isCitusTable(q, table)) continue;
    const colocateWith = table === 'events' ? 'default' : 'events';
    await q.query(`SELECT create_distributed_table($1, 'app_id', colocate_with => $2)`, [
      table,
      colocateWith,
    ]);
  }
}

/**
 * Empties the coordinator's own copy of rows that distributing `tables` moved to the workers (a
 * database converted from a single node); Citus no longer reads it. After every table is
 * distributed, since a local table's foreign key would refuse it.
 */
export async function dropLocalCopies(q: QueryRunner, tables: string[]): Promise<void> {
  for (const table of tables) {
    await q.query(`SELECT truncate_local_data_after_distributing_table($1)`, [table]);
  }
}
