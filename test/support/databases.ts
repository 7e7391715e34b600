import { Client } from 'pg';
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
