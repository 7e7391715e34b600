import type { PoolClient } from 'pg';
import type { DataSource } from 'typeorm';

/**
 * Runs `work` on the driver's own client of one of `db`'s pooled connections, and gives the
 * connection back however it ends. For what TypeORM's `query()` does not offer: named (prepared)
 * statements, array rows, COPY, several statements in one round trip. An error of `work` reaches
 * the caller as the driver raised it, so a lost connection is still recognised as one.
 */
export async function withDriverClient<T>(
  db: DataSource,
  work: (client: PoolClient) => Promise<T>,
): Promise<T> {
  const runner = db.createQueryRunner();
  try {
    return await work((await runner.connect()) as PoolClient);
  } finally {
    await runner.release();
  }
}

/**
 * withDriverClient's `work` in one transaction: `begin` opens it (`BEGIN` with its options, and
 * any `SET LOCAL` after it); COMMIT once `work` resolves, ROLLBACK when it throws, and the error
 * then reaches the caller as raised.
 */
export function withDriverTransaction<T>(
  db: DataSource,
  begin: string,
  work: (client: PoolClient) => Promise<T>,
): Promise<T> {
  return withDriverClient(db, async (client) => {
    await client.query(begin);
    try {
      const out = await work(client);
      await client.query('COMMIT');
      return out;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  });
}
