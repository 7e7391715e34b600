import { ConfigError, loadConfig } from './config';

describe('loadConfig', () => {
  it('has the documented defaults', () => {
    const c = loadConfig({});
    expect(c.port).toBe(3000);
    expect(c.databaseUrl).toBeUndefined();
    expect(c.ingestMaxEvents).toBe(1000);
    expect(c.ingestMaxBytes).toBe(1_048_576);
    expect(c.ingestMaxEventBytes).toBe(32_768);
    expect(c.ingestMaxEventAgeDays).toBe(7);
    expect(c.piiPolicy).toBe('redact');
    expect(c.rateWindowMs).toBe(1000);
    expect(c.ingestRateRequests).toBe(100);
    expect(c.ingestRateEvents).toBe(50_000);
    expect(c.readRateRequests).toBe(50);
    expect(c.authFailureLimit).toBe(20);
    expect(c.rollupIntervalSeconds).toBe(60);
    expect(c.eventRetentionDays).toBe(90);
    expect(c.keyCacheTtlMs).toBeLessThanOrEqual(30_000);
    expect(c.dashboardEnabled).toBe(true);
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
