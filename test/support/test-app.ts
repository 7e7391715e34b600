import type { INestApplication } from '@nestjs/common';
import { createHash } from 'node:crypto';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { DataSource } from 'typeorm';
import { getDataSourceToken } from '@nestjs/typeorm';
import { AppConfig, loadConfig } from '@app/config/config';
import { prepareDatabase } from '@app/database/prepare';
import { createApp } from '@app/app.factory';
import type { AppOptions } from '@app/app.module';

export interface TestApp {
  app: INestApplication;
  http: Server;
  config: AppConfig;
  /** The primary DataSource, for asserting what is stored. */
  db: DataSource;
  close(): Promise<void>;
}

export function testDatabaseUrl(): string {
  const url = process.env.TALLY_TEST_DATABASE_URL;
  if (!url) throw new Error('TALLY_TEST_DATABASE_URL is not set; run the tests through jest');
  return url;
}

/**
 * The test database under a URL of its own, which the service takes for a read replica
 * (DATABASE_READ_URL): not a standby, so its lag is 0. test:replica runs a real one.
 */
export function testReplicaUrl(): string {
  const url = new URL(testDatabaseUrl());
  url.searchParams.set('application_name', 'tally-replica-under-test');
  return url.toString();
}

/**
 * The erasure ledger of this test process and database: in the system's temporary folder, never
 * in the checkout, and one per database, so that no test app replays another database's erasures.
 */
export function testLedgerPath(databaseUrl: string): string {
  const db = createHash('sha256').update(databaseUrl).digest('hex').slice(0, 12);
  return path.join(tmpdir(), `tally-test-erasure-ledger-${process.pid}-${db}.ndjson`);
}

/** Environment for a test server: the test database, quiet logs, no scheduled work. */
export function testEnv(env: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: testDatabaseUrl(),
    ERASURE_LEDGER_PATH: testLedgerPath(env.DATABASE_URL ?? testDatabaseUrl()),
    LOG_LEVEL: 'silent',
    ROLLUPS_ENABLED: 'false',
    DATABASE_POOL_SIZE: '4',
    ...env,
  };
}

/**
 * Boots the real application (migrations included) in-process, for Supertest. Logs are off
 * (LOG_LEVEL=silent) unless `env` asks for them; `options.logDestination` captures them.
 */
export async function startTestApp(
  env: Record<string, string> = {},
  options: AppOptions = {},
): Promise<TestApp> {
  const config = loadConfig(testEnv(env));
  await prepareDatabase(config, { migrate: true });
  const app = await createApp(config, options);
  await app.init();
  return {
    app,
    http: app.getHttpServer() as Server,
    config,
    db: app.get<DataSource>(getDataSourceToken()),
    close: () => app.close(),
  };
}

/**
 * Starts a test app before the tests of the enclosing `describe` (or file) and closes it after
 * them. The returned object is filled in by the time the first test runs.
 */
export function useTestApp(env: Record<string, string> = {}, options: AppOptions = {}): TestApp {
  const handle = {} as TestApp;
  beforeAll(async () => {
    Object.assign(handle, await startTestApp(env, options));
  });
  afterAll(async () => {
    await handle.close?.();
  });
  return handle;
}
