import * as path from 'node:path';

/**
 * The whole runtime configuration. It is read from the environment once, at boot, by
 * `loadConfig`; nothing else in the code base reads `process.env`.
 */
export interface AppConfig {
  port: number;
  host: string;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  trustProxy: boolean;
  shutdownTimeoutMs: number;

  databaseUrl: string | undefined;
  databaseReadUrl: string | undefined;
  databasePoolSize: number;
  databaseStatementTimeoutMs: number;
  embeddedPgDir: string;
  embeddedPgPort: number;
  migrationsRun: boolean;

  redisUrl: string | undefined;
  /** Prepended to every Redis key, so that several deployments can share one Redis. */
  redisKeyPrefix: string;

  keyCacheTtlMs: number;

  ingestMaxEvents: number;
  ingestMaxBytes: number;
  ingestMaxEventBytes: number;
  /** Decoded ingest body bytes held at once per instance; past it, new bodies get 503. */
  ingestMaxInflightBytes: number;
  ingestMaxEventAgeDays: number;
  /** The most entries an ingest response lists in `errors`, and in `warnings`; all are counted. */
  ingestMaxErrorsListed: number;
  /** Ingest statements running at once per instance (group commit); at most the pool size. */
  ingestWriteConcurrency: number;
  /** The most events one ingest statement takes from waiting requests; a larger request goes alone. */
  ingestWriteMaxEvents: number;
  piiPolicy: 'redact' | 'reject' | 'allow';

  rateWindowMs: number;
  ingestRateRequests: number;
  ingestRateEvents: number;
  readRateRequests: number;
  authFailureLimit: number;

  rollupsEnabled: boolean;
  rollupIntervalSeconds: number;
  eventRetentionDays: number;
  partitionsAheadDays: number;
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`Invalid configuration: ${variable} ${message}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

function raw(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  if (!/^-?\d+$/.test(value)) throw new ConfigError(name, `must be an integer, got "${value}"`);
  const n = Number(value);
  if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  if (/^(true|1|yes|on)$/i.test(value)) return true;
  if (/^(false|0|no|off)$/i.test(value)) return false;
  throw new ConfigError(name, `must be true or false, got "${value}"`);
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  if (!(allowed as readonly string[]).includes(value)) {
    throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got "${value}"`);
  }
  return value as T;
}

function url(env: Env, name: string, protocols: string[]): string | undefined {
  const value = raw(env, name);
  if (value === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    throw new ConfigError(name, 'must be a URL');
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(name, `must use one of ${protocols.join(', ')}`);
  }
  return value;
}

function redisPrefix(env: Env, name: string, fallback: string): string {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  if (!/^[A-Za-z0-9_.:-]{1,64}$/.test(value)) {
    throw new ConfigError(name, `must be 1-64 characters of A-Z a-z 0-9 _ . : -, got "${value}"`);
  }
  return value;
}

/** Builds and validates the configuration from an environment map. Throws ConfigError. */
export function loadConfig(env: Env): AppConfig {
  const config = readConfig(env);
  // Partitions must outlive the oldest event ingest still accepts, or an insert would miss them.
  if (config.eventRetentionDays <= config.ingestMaxEventAgeDays) {
    throw new ConfigError(
      'EVENT_RETENTION_DAYS',
      `must be greater than INGEST_MAX_EVENT_AGE_DAYS (${config.ingestMaxEventAgeDays}), got ${config.eventRetentionDays}`,
    );
  }
  // A body the budget could never hold would be refused forever.
  if (config.ingestMaxInflightBytes < config.ingestMaxBytes) {
    throw new ConfigError(
      'INGEST_MAX_INFLIGHT_BYTES',
      `must be at least INGEST_MAX_BYTES (${config.ingestMaxBytes}), got ${config.ingestMaxInflightBytes}`,
    );
  }
  // Each running ingest statement holds a pooled connection; the rest serve reads and checks.
  if (config.ingestWriteConcurrency > config.databasePoolSize) {
    throw new ConfigError(
      'INGEST_WRITE_CONCURRENCY',
      `must not exceed DATABASE_POOL_SIZE (${config.databasePoolSize}), got ${config.ingestWriteConcurrency}`,
    );
  }
  return config;
}

function readConfig(env: Env): AppConfig {
  const rateWindowMs = int(env, 'RATE_WINDOW_MS', 1000, 100, 3_600_000);
  return {
    port: int(env, 'PORT', 3000, 0, 65535),
    host: raw(env, 'HOST') ?? '0.0.0.0',
    logLevel: oneOf(
      env,
      'LOG_LEVEL',
      ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const,
      'info',
    ),
    trustProxy: bool(env, 'TRUST_PROXY', false),
    shutdownTimeoutMs: int(env, 'SHUTDOWN_TIMEOUT_MS', 15_000, 100, 600_000),

    databaseUrl: url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']),
    databaseReadUrl: url(env, 'DATABASE_READ_URL', ['postgres:', 'postgresql:']),
    databasePoolSize: int(env, 'DATABASE_POOL_SIZE', 10, 1, 200),
    databaseStatementTimeoutMs: int(env, 'DATABASE_STATEMENT_TIMEOUT_MS', 30_000, 100, 3_600_000),
    embeddedPgDir: path.resolve(raw(env, 'EMBEDDED_PG_DIR') ?? '.data'),
    embeddedPgPort: int(env, 'EMBEDDED_PG_PORT', 54329, 1024, 65535),
    migrationsRun: bool(env, 'MIGRATIONS_RUN', true),

    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    redisKeyPrefix: redisPrefix(env, 'REDIS_KEY_PREFIX', 'tally:'),

    keyCacheTtlMs: int(env, 'KEY_CACHE_TTL_MS', 10_000, 0, 30_000),

    ingestMaxEvents: int(env, 'INGEST_MAX_EVENTS', 1000, 1, 100_000),
    ingestMaxBytes: int(env, 'INGEST_MAX_BYTES', 1_048_576, 1024, 64 * 1_048_576),
    ingestMaxEventBytes: int(env, 'INGEST_MAX_EVENT_BYTES', 32_768, 256, 1_048_576),
    ingestMaxInflightBytes: int(env, 'INGEST_MAX_INFLIGHT_BYTES', 32 * 1_048_576, 1024, 4096 * 1_048_576),
    ingestMaxEventAgeDays: int(env, 'INGEST_MAX_EVENT_AGE_DAYS', 7, 1, 365),
    ingestMaxErrorsListed: int(env, 'INGEST_MAX_ERRORS_LISTED', 100, 0, 100_000),
    ingestWriteConcurrency: int(env, 'INGEST_WRITE_CONCURRENCY', 4, 1, 200),
    ingestWriteMaxEvents: int(env, 'INGEST_WRITE_MAX_EVENTS', 1000, 1, 100_000),
    piiPolicy: oneOf(env, 'PII_POLICY', ['redact', 'reject', 'allow'] as const, 'redact'),

    rateWindowMs,
    ingestRateRequests: int(env, 'INGEST_RATE_REQUESTS', 100, 1, 10_000_000),
    ingestRateEvents: int(env, 'INGEST_RATE_EVENTS', 50_000, 1, 1_000_000_000),
    readRateRequests: int(env, 'READ_RATE_REQUESTS', 50, 1, 10_000_000),
    authFailureLimit: int(env, 'AUTH_FAILURE_LIMIT', 20, 1, 10_000_000),

    rollupsEnabled: bool(env, 'ROLLUPS_ENABLED', true),
    rollupIntervalSeconds: int(env, 'ROLLUP_INTERVAL_SECONDS', 60, 1, 86_400),
    eventRetentionDays: int(env, 'EVENT_RETENTION_DAYS', 90, 1, 3650),
    partitionsAheadDays: int(env, 'PARTITIONS_AHEAD_DAYS', 3, 1, 60),
  };
}

/** Reads the process environment. The only place that touches `process.env`. */
export function loadConfigFromProcess(overrides: Env = {}): AppConfig {
  return loadConfig({ ...process.env, ...overrides });
}

export const APP_CONFIG = Symbol('APP_CONFIG');
