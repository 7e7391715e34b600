import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { loadConfig } from '@app/config/config';
import { runCli } from '@app/cli/main';
import { ExportRepository } from '@app/export/export.repository';
import { ExportService } from '@app/export/export.service';
import { CursorSecretRepository } from '@app/common/reads/cursor-secret.repository';
import { FixedReadDatabase } from '@app/database/read-database';
import { makeApp } from './factories';
import { seedEvents } from './factories/events';
import { testEnv, useTestApp } from './support/test-app';

const HOUR = 3_600_000;

async function cli(...argv: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await runCli(
    argv,
    { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) },
    loadConfig(testEnv({ EXPORT_CHUNK_ROWS: '100' })),
  );
  return { code, stdout, stderr };
}

describe('tally export', () => {
  const t = useTestApp();
  const dir = mkdtempSync(join(tmpdir(), 'tally-export-cli-'));
  let appId: string;
  const base = Date.now() - 3 * HOUR;

  beforeAll(async () => {
    appId = (await makeApp(t.app)).id;
    await seedEvents(
      t.db,
      appId,
      Array.from({ length: 450 }, (_, i) => ({
        eventName: 'Cli.export',
        receivedAt: base + i * 1000,
        eventTime: base + i * 1000 - (i % 9 === 0 ? 2 * 24 * HOUR : 0),
        eventId: `c-${i}`,
        floatValue: i,
      })),
    );
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('writes the window as NDJSON to --out and prints one JSON document', async () => {
    const out = join(dir, 'events.ndjson');
    const run = await cli(
      'export',
      '--app',
      appId,
      '--from',
      String(base),
      '--to',
      String(base + HOUR),
      '--out',
      out,
      '--json',
    );
    expect(run.code).toBe(0);
    const doc = JSON.parse(run.stdout);
    expect(doc).toEqual({
      appId,
      from: base,
      to: base + HOUR,
      format: 'ndjson',
      out,
      events: 450,
      bytes: expect.any(Number),
    });
    const lines = readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.map((r) => r.eventId)).toEqual(Array.from({ length: 450 }, (_, i) => `c-${i}`));
    expect(doc.bytes).toBe(readFileSync(out).length);
  });

  it('writes Parquet that DuckDB reads', async () => {
    const out = join(dir, 'events.parquet');
    const run = await cli(
      'export',
      '--app',
      appId,
      '--from',
      String(base),
      '--format',
      'parquet',
      '--out',
      out,
    );
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^Exported 450 events/);
    const conn = await (await DuckDBInstance.create(':memory:')).connect();
    const rows = (
      await conn.runAndReadAll(`SELECT count(*)::INTEGER, sum("floatValue") FROM read_parquet('${out}')`)
    ).getRows();
    expect(rows[0]).toEqual([450, (449 * 450) / 2]);
    conn.closeSync();
  });

  it.each([
    [['--from', 'soon'], /from must be epoch ms or ISO-8601/],
    [['--from', '1000', '--to', String(Date.now() + HOUR)], /export horizon/],
    [['--from', '1000', '--format', 'csv'], /--format/],
    [['--from', '1000', '--format', 'parquet'], /--out is required/],
  ])('usage error for %j', async (args, pattern) => {
    const run = await cli('export', '--app', appId, ...args);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(pattern);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('refuses an unknown app (exit 3)', async () => {
    const run = await cli(
      'export',
      '--app',
      '0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c',
      '--from',
      '1000',
      '--out',
      join(dir, 'x'),
    );
    expect(run.code).toBe(3);
    expect(run.stderr).toMatch(/No such app/);
  });
});

describe('the export resumes by itself after a dropped database connection (the CLI path)', () => {
  const t = useTestApp();

  it('reads the chunk again from the same position, so no row is lost or repeated', async () => {
    const appId = (await makeApp(t.app)).id;
    const base = Date.now() - 3 * HOUR;
    await seedEvents(
      t.db,
      appId,
      Array.from({ length: 250 }, (_, i) => ({
        eventName: 'Cli.drop',
        receivedAt: base + i,
        eventId: `d-${i}`,
      })),
    );
    const config = loadConfig(testEnv({ EXPORT_CHUNK_ROWS: '100' }));
    let calls = 0;
    // The second chunk's statement has its connection killed under it, as a failover would.
    class Dropping extends ExportRepository {
      override async copyChunk(...args: Parameters<ExportRepository['copyChunk']>) {
        if (++calls === 2) await t.db.query('SELECT pg_terminate_backend(pg_backend_pid())');
        return super.copyChunk(...args);
      }
    }
    const service = new ExportService(
      config,
      new Dropping(new FixedReadDatabase(t.db)),
      new CursorSecretRepository(t.db),
    );
    const retried: unknown[] = [];
    const plan = await service.plan({ appId, from: String(base), to: String(base + HOUR) });
    const ids: string[] = [];
    for await (const chunk of service.ndjsonChunks(plan, {
      retries: 3,
      onRetry: (err) => retried.push(err),
    })) {
      const lines = chunk.lines.toString('utf8').trimEnd().split('\n');
      ids.push(...lines.map((line) => (JSON.parse(line) as { eventId: string }).eventId));
      chunk.release();
    }
    expect(retried).toHaveLength(1);
    expect(ids).toEqual(Array.from({ length: 250 }, (_, i) => `d-${i}`));
  });
});
