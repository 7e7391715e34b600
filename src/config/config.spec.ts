import { ConfigError, defaultIngestCpuMsPerSecond, defaultWriteConcurrency, loadConfig } from './config';
import { Derived } from './setting';
import { SETTINGS } from './settings';

describe('loadConfig', () => {
  it('has the documented defaults', () => {
    const c = loadConfig({});
    expect(c.port).toBe(3000);
    expect(c.databaseUrl).toBeUndefined();
    expect(c.ingestMaxEvents).toBe(1000);
    expect(c.ingestMaxBytes).toBe(1_048_576);
    expect(c.ingestMaxEventBytes).toBe(32_768);
    expect(c.ingestMaxEventAgeDays).toBe(30);
    expect(c.piiPolicy).toBe('redact');
    expect(c.rateWindowMs).toBe(1000);
    expect(c.ingestRateRequests).toBe(100);
    expect(c.ingestRateEvents).toBe(50_000);
    expect(c.readRateRequests).toBe(50);
    expect(c.authFailureLimit).toBe(20);
    expect(c.rollupIntervalSeconds).toBe(60);
    expect(c.eventRetentionDays).toBe(90);
    expect(c.lookupSummaryIntervalMs).toBe(2_000);
    expect(c.keyCacheTtlMs).toBeLessThanOrEqual(30_000);
    expect(c.dashboardEnabled).toBe(true);
    expect(c.databaseReadUrl).toBeUndefined();
    expect(c.readMaxLagMs).toBe(30_000);
    expect(c.readReturnChecks).toBe(5);
  });

  it('runs one ingest statement per core, 2 to 4, beside a database on this machine, and 4 against one elsewhere', () => {
    expect(defaultWriteConcurrency(undefined, 1)).toBe(2);
    expect(defaultWriteConcurrency(undefined, 2)).toBe(2);
    expect(defaultWriteConcurrency(undefined, 3)).toBe(3);
    expect(defaultWriteConcurrency(undefined, 16)).toBe(4);
    expect(defaultWriteConcurrency('postgres://u:p@127.0.0.1:5432/tally', 2)).toBe(2);
    expect(defaultWriteConcurrency('postgres://localhost/tally', 2)).toBe(2);
    expect(defaultWriteConcurrency('postgres://[::1]:5432/tally', 2)).toBe(2);
    expect(defaultWriteConcurrency('postgres://u@x/tally?host=/var/run/postgresql', 2)).toBe(2);
    expect(defaultWriteConcurrency('postgres://db.internal/tally', 2)).toBe(4);
    expect(defaultWriteConcurrency('postgres://10.0.0.5:5432/tally', 2)).toBe(4);
    expect(loadConfig({ DATABASE_URL: 'postgres://db.internal/tally' }).ingestWriteConcurrency).toBe(4);
    expect(loadConfig({ INGEST_WRITE_CONCURRENCY: '7' }).ingestWriteConcurrency).toBe(7);
    expect(
      loadConfig({ DATABASE_URL: 'postgres://db.internal/tally', DATABASE_POOL_SIZE: '3' })
        .ingestWriteConcurrency,
    ).toBe(3);
    expect(() => loadConfig({ DATABASE_POOL_SIZE: '3', INGEST_WRITE_CONCURRENCY: '4' })).toThrow(ConfigError);
  });

  it.each([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['DATABASE_URL', 'not a url'],
    ['DATABASE_URL', 'mysql://localhost/x'],
    ['REDIS_URL', 'http://localhost'],
    ['PII_POLICY', 'maybe'],
    ['ROLLUPS_ENABLED', 'perhaps'],
    ['DASHBOARD_ENABLED', 'sometimes'],
    ['KEY_CACHE_TTL_MS', '60000'],
    ['INGEST_MAX_EVENTS', '0'],
    ['EVENT_RETENTION_DAYS', '7'],
    ['TRUST_PROXY', 'true'],
    ['TRUST_PROXY', '10.0.0.0/8,bogus'],
    ['INGEST_BODY_IDLE_MS', '0'],
    ['READ_STATEMENT_TIMEOUT_MS', '0'],
    ['READ_MAX_CONCURRENT_PER_KEY', '0'],
    ['READ_TIME_MS_PER_SECOND', '0'],
    ['DATABASE_READ_URL', 'http://replica'],
    ['READ_MAX_LAG_MS', 'soon'],
    ['READ_MAX_LAG_MS', '0'],
    ['READ_RETURN_CHECKS', '0'],
  ])('refuses %s=%s with a message naming the variable', (name, value) => {
    let error: unknown;
    try {
      loadConfig({ [name]: value });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).variable).toBe(name);
    expect((error as Error).message).toContain(name);
  });

  it('reads TRUST_PROXY as Express trust-proxy settings: off, a hop count or proxy addresses', () => {
    expect(loadConfig({}).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: 'false' }).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: '2' }).trustProxy).toBe(2);
    expect(loadConfig({ TRUST_PROXY: 'loopback, 10.0.0.0/8,2001:db8::/32' }).trustProxy).toEqual([
      'loopback',
      '10.0.0.0/8',
      '2001:db8::/32',
    ]);
  });

  it('gives one key a quarter of the in-flight budget by default, and at least one body', () => {
    expect(loadConfig({}).ingestMaxInflightBytesPerKey).toBe(8 * 1_048_576);
    expect(
      loadConfig({ INGEST_MAX_BYTES: '2097152', INGEST_MAX_INFLIGHT_BYTES: '4194304' })
        .ingestMaxInflightBytesPerKey,
    ).toBe(2_097_152);
    expect(loadConfig({}).ingestBodyIdleMs).toBe(10_000);
    expect(loadConfig({}).ingestBodyMinBytesPerSecond).toBe(1024);
  });

  it('accepts valid overrides', () => {
    const c = loadConfig({
      PORT: '8080',
      PII_POLICY: 'reject',
      ROLLUPS_ENABLED: 'false',
      DASHBOARD_ENABLED: 'false',
      DATABASE_URL: 'postgres://u@h/db',
    });
    expect(c).toMatchObject({
      port: 8080,
      piiPolicy: 'reject',
      rollupsEnabled: false,
      dashboardEnabled: false,
      databaseUrl: 'postgres://u@h/db',
    });
  });
});

describe('INGEST_CPU_MS_PER_SECOND default', () => {
  it('is a sixteenth of the cores in ms, from 100 to 250', () => {
    expect(defaultIngestCpuMsPerSecond(1)).toBe(100);
    expect(defaultIngestCpuMsPerSecond(2)).toBe(125);
    expect(defaultIngestCpuMsPerSecond(4)).toBe(250);
    expect(defaultIngestCpuMsPerSecond(64)).toBe(250);
  });
});

describe('the settings table', () => {
  it('derives a default only from settings read before it', () => {
    const keys = Object.keys(SETTINGS);
    Object.values(SETTINGS).forEach((setting, index) => {
      if (!(setting.default instanceof Derived)) return;
      for (const used of setting.default.uses) {
        expect(keys.indexOf(used)).toBeGreaterThanOrEqual(0);
        expect(keys.indexOf(used)).toBeLessThan(index);
      }
    });
  });

  it('names, of several bad variables, the first in the table', () => {
    expect(() => loadConfig({ EXPORT_CHUNK_ROWS: '0', RATE_WINDOW_MS: 'x', PORT: 'abc' })).toThrow(
      'Invalid configuration: PORT must be an integer, got "abc"',
    );
    expect(() => loadConfig({ EXPORT_CHUNK_ROWS: '0', RATE_WINDOW_MS: 'x' })).toThrow(
      'Invalid configuration: RATE_WINDOW_MS must be an integer, got "x"',
    );
  });

  it('keeps the messages of the rules between settings', () => {
    expect(() => loadConfig({ INGEST_MAX_BYTES: '8192', INGEST_MAX_INFLIGHT_BYTES: '4096' })).toThrow(
      'Invalid configuration: INGEST_MAX_INFLIGHT_BYTES must be at least INGEST_MAX_BYTES (8192), got 4096',
    );
    expect(() => loadConfig({ EVENT_RETENTION_DAYS: '7' })).toThrow(
      'Invalid configuration: EVENT_RETENTION_DAYS must be greater than INGEST_MAX_EVENT_AGE_DAYS (30), got 7',
    );
    expect(() => loadConfig({ DATABASE_POOL_SIZE: '3', INGEST_WRITE_CONCURRENCY: '4' })).toThrow(
      'Invalid configuration: INGEST_WRITE_CONCURRENCY must not exceed DATABASE_POOL_SIZE (3), got 4',
    );
  });
});
