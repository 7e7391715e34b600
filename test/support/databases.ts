import { Client } from 'pg';
import type { DataSource, QueryRunner } from 'typeorm';
import { createDataSource } from '@app/database/data-source';
import { userKey } from '@app/common/user-keys';
import { testDatabaseUrl } from './test-app';

/** The test cluster's URL with another database name. */
export function otherDatabase(name: string): string {
  const url = new URL(testDatabaseUrl());
  url.pathname = `/${name}`;
  return url.toString();
}

/** Drops database `name` if it exists (closing its sessions) and creates it empty. */
export async function recreateDatabase(name: string): Promise<void> {
  const admin = new Client({ connectionString: testDatabaseUrl() });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
}

/**
 * A data source on database `name`, made empty before the suite and closed after it: for tests
 * that run migrations one by one.
 */
export function useMigrationDatabase(name: string): DataSource {
  const db = createDataSource({ url: otherDatabase(name), poolSize: 2 });
  beforeAll(async () => {
    await recreateDatabase(name);
    await db.initialize();
  });
  afterAll(() => db.destroy());
  return db;
}

/** One migration's `up` or `down`, in a transaction of its own, as the migrator runs it. */
export async function migrationStep(
  db: DataSource,
  run: (runner: QueryRunner) => Promise<void>,
): Promise<void> {
  const runner = db.createQueryRunner();
  await runner.startTransaction();
  await run(runner);
  await runner.commitTransaction();
  await runner.release();
}

/**
 * The exported record of an event record as GET /api/v1/events gives it: the record and its
 * user's key outside Tally (src/common/user-keys.ts, with the database's `user_key` secret).
 */
export async function asExported<R extends { appId: string; anonymousUserId: string | null }>(
  db: { query(sql: string): Promise<unknown> },
  records: R[],
): Promise<(R & { userKey: string | null })[]> {
  const [row] = (await db.query(`SELECT value FROM server_secrets WHERE name = 'user_key'`)) as {
    value: Buffer;
  }[];
  return records.map((r) => ({
    ...r,
    userKey: r.anonymousUserId === null ? null : userKey(row.value, r.appId, r.anonymousUserId),
  }));
}
