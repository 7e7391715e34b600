import * as path from 'node:path';
import { existsSync, readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { availableParallelism } from 'node:os';

/**
 * The whole runtime configuration. It is read from the environment once, at boot, by
 * `loadConfig`; nothing else in the code base reads `process.env`.
 */
/** What ingest does with an email, phone or card number in a free-form field. */
export const PII_POLICIES = ['redact', 'reject', 'allow'] as const;
export type PiiPolicy = (typeof PII_POLICIES)[number];

export interface AppConfig {
  port: number;
  host: string;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /**
   * Which proxies to believe about the client address (Express `trust proxy`): false (none), a
   * hop count, or a list of proxy addresses, CIDRs and Express's names (loopback, linklocal,
   * uniquelocal). The client address is the right-most untrusted `X-Forwarded-For` entry.
   */
  trustProxy: false | number | string[];
  shutdownTimeoutMs: number;

  databaseUrl: string | undefined;
  databaseReadUrl: string | undefined;
  /** Replica lag past which reads go to the primary (ms). */
  readMaxLagMs: number;
  /** Healthy replica checks in a row (one a second) before reads return to it. */
  readReturnChecks: number;
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
  /** The share of that budget one key may hold at once; past it, its new bodies get 429. */
  ingestMaxInflightBytesPerKey: number;
  /** An ingest body that sends no byte for this long gets 408 and frees its budget. */
  ingestBodyIdleMs: number;
  /** The slowest upload accepted, measured over each INGEST_BODY_IDLE_MS window; 0 turns it off. */
  ingestBodyMinBytesPerSecond: number;
  ingestMaxEventAgeDays: number;
  /** The most entries an ingest response lists in `errors`, and in `warnings`; all are counted. */
  ingestMaxErrorsListed: number;
  /** Ingest statements running at once per instance (group commit); at most the pool size. */
  ingestWriteConcurrency: number;
  /** The most events one ingest statement takes from waiting requests; a larger request goes alone. */
  ingestWriteMaxEvents: number;
  /** Distinct event names one app may send per (UTC) day; events with a further new name are rejected. */
  ingestMaxEventNamesPerDay: number;
  piiPolicy: PiiPolicy;

  rateWindowMs: number;
  ingestRateRequests: number;
  ingestRateEvents: number;
  readRateRequests: number;
  /** Statement timeout of the read endpoints' queries (the read pool only); past it, 503. */
  readStatementTimeoutMs: number;
  /** Reads one key may have running at once on an instance; past it, 429. */
  readMaxConcurrentPerKey: number;
  /** Read time (ms) one key may use per second on an instance, after a 1 s burst; past it, 429. */
  readTimeMsPerSecond: number;
  /** Ingest CPU (ms of parsing and validation) one key may use per second on an instance; past it, 429. */
  ingestCpuMsPerSecond: number;
  authFailureLimit: number;

  rollupsEnabled: boolean;
  rollupIntervalSeconds: number;
  /** The most rows one GET /api/v1/rollups answer holds; more come through the cursor. */
  rollupsMaxRows: number;
  /** Distinct values per (app, local day, dimension) that breakdowns keep; the rest is folded into `other`. */
  breakdownMaxValues: number;
  /**
   * After each piece of a deletion's work (a batch of deletes, a day of rollups), its job pauses
   * for this percent of the time the piece took, so that ingest keeps most of the machine.
   */
  erasurePausePercent: number;
  /**
   * The erasure ledger: every finished deletion, appended and fsynced before it is `done`, and
   * re-applied at start to a database that lacks it (a restored backup). Keep it on storage that
   * outlives the database.
   */
  erasureLedgerPath: string;
  eventRetentionDays: number;
  partitionsAheadDays: number;
  /** How often the lookup indexes of the days ingest writes get their new ranges summarized; 0: never. */
  lookupSummaryIntervalMs: number;
  /** Days an event rejected by a tracking plan stays in the quarantine. */
  quarantineDays: number;
  /** Quarantined events kept per app and UTC receive day; past it, events are counted, not kept. */
  quarantineMaxEventsPerDay: number;

  /** Serve the read-only web dashboard at /dashboard. */
  dashboardEnabled: boolean;

  /** The export horizon: a window may end no later than now minus this (ingest commits within it). */
  exportSettleMs: number;
  /** Rows an export reads per statement (one keyset-paged chunk). */
  exportChunkRows: number;
  /** Exports running at once per instance, whatever the key; past it, 429. */
  exportMaxConcurrent: number;
  /** An export response that its client has not read for this long is closed and frees its slot. */
  exportIdleTimeoutMs: number;
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

/**
 * The folder of the Tally installation this code belongs to: the nearest folder above this file
 * whose package.json names the `tally` package. The embedded database lives there by default, so
 * the service and the CLI find it whatever the current directory.
 */
export function installationRoot(from = __dirname): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const manifest = path.join(dir, 'package.json');
    if (existsSync(manifest)) {
      try {
        if ((JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'tally') return dir;
      } catch {
        // Not a package of ours: look further up.
      }
    }
    if (path.dirname(dir) === dir) return process.cwd();
  }
}

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

const PROXY_NAMES = ['loopback', 'linklocal', 'uniquelocal'];

function isAddressOrCidr(entry: string): boolean {
  const [address, bits, ...rest] = entry.split('/');
  const family = isIP(address);
  if (!family || rest.length) return false;
  if (bits === undefined) return true;
  if (!/^\d{1,3}$/.test(bits)) return false;
  return Number(bits) <= (family === 4 ? 32 : 128);
}

/**
 * TRUST_PROXY: false, a hop count, or a comma-separated list of proxy addresses, CIDRs and
 * Express's names. `true` (trust every hop) is refused: the left-most X-Forwarded-For entry,
 * which it would take, is whatever the client wrote.
 */
function trustProxy(env: Env, name: string): false | number | string[] {
  const value = raw(env, name);
  if (value === undefined || /^(false|0|no|off)$/i.test(value)) return false;
  if (/^(true|yes|on)$/i.test(value)) {
    throw new ConfigError(
      name,
      'must be a hop count (e.g. 1) or the proxy addresses/CIDRs, not "true": trusting every hop lets clients choose their address',
    );
  }
  if (/^\d+$/.test(value)) {
    const hops = Number(value);
    if (hops > 100) throw new ConfigError(name, `must be a hop count between 1 and 100, got ${hops}`);
    return hops;
  }
  const entries = value.split(',').map((e) => e.trim().toLowerCase());
  const bad = entries.find((e) => !PROXY_NAMES.includes(e) && !isAddressOrCidr(e));
  if (bad !== undefined) {
    throw new ConfigError(
      name,
      `must be false, a hop count, or a list of addresses, CIDRs, loopback, linklocal, uniquelocal; "${bad}" is none of these`,
    );
  }
  return entries;
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
  if (config.ingestMaxInflightBytesPerKey < config.ingestMaxBytes) {
    throw new ConfigError(
      'INGEST_MAX_INFLIGHT_BYTES_PER_KEY',
      `must be at least INGEST_MAX_BYTES (${config.ingestMaxBytes}), got ${config.ingestMaxInflightBytesPerKey}`,
    );
  }
  if (config.ingestMaxInflightBytesPerKey > config.ingestMaxInflightBytes) {
    throw new ConfigError(
      'INGEST_MAX_INFLIGHT_BYTES_PER_KEY',
      `must not exceed INGEST_MAX_INFLIGHT_BYTES (${config.ingestMaxInflightBytes}), got ${config.ingestMaxInflightBytesPerKey}`,
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

/**
 * Ingest statements at once, unless INGEST_WRITE_CONCURRENCY says. A PostgreSQL on this machine
 * (the embedded one, or a URL naming a loopback address or a socket folder) shares its cores with
 * the server: more statements than cores only contend, for the B-trees' right-hand pages and for
 * the cores themselves, and cost PostgreSQL more CPU per event. So it gets one per core, 2 to 4
 * (docs/performance.md). A database elsewhere gets 4.
 */
export function defaultWriteConcurrency(databaseUrl: string | undefined, cores: number): number {
  return databaseOnThisMachine(databaseUrl) ? Math.min(4, Math.max(2, cores)) : 4;
}

function databaseOnThisMachine(databaseUrl: string | undefined): boolean {
  if (databaseUrl === undefined) return true;
  const u = new URL(databaseUrl);
  const host = u.searchParams.get('host') ?? u.hostname;
  return host === '' || host.startsWith('/') || ['localhost', '127.0.0.1', '[::1]', '::1'].includes(host);
}

function readConfig(env: Env): AppConfig {
  const rateWindowMs = int(env, 'RATE_WINDOW_MS', 1000, 100, 3_600_000);
  const ingestMaxBytes = int(env, 'INGEST_MAX_BYTES', 1_048_576, 1024, 64 * 1_048_576);
  const ingestMaxInflightBytes = int(
    env,
    'INGEST_MAX_INFLIGHT_BYTES',
    32 * 1_048_576,
    1024,
    4096 * 1_048_576,
  );
  const databaseUrl = url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']);
  const databasePoolSize = int(env, 'DATABASE_POOL_SIZE', 10, 1, 200);
  // Read in this order, so that of several bad settings the same one is named first as before.
  return {
    ...readServerSettings(env),
    ...readStorageSettings(env, databaseUrl, databasePoolSize),
    ...readIngestSettings(env, { ingestMaxBytes, ingestMaxInflightBytes, databaseUrl, databasePoolSize }),
    ...readLimitSettings(env, rateWindowMs),
    ...readJobSettings(env),
  };
}

function readServerSettings(env: Env) {
  return {
    port: int(env, 'PORT', 3000, 0, 65535),
    host: raw(env, 'HOST') ?? '0.0.0.0',
    logLevel: oneOf(
      env,
      'LOG_LEVEL',
      ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const,
      'info',
    ),
    trustProxy: trustProxy(env, 'TRUST_PROXY'),
    shutdownTimeoutMs: int(env, 'SHUTDOWN_TIMEOUT_MS', 15_000, 100, 600_000),
  };
}

/** The database, Redis and the key cache. */
function readStorageSettings(env: Env, databaseUrl: string | undefined, databasePoolSize: number) {
  return {
    databaseUrl,
    databaseReadUrl: url(env, 'DATABASE_READ_URL', ['postgres:', 'postgresql:']),
    readMaxLagMs: int(env, 'READ_MAX_LAG_MS', 30_000, 100, 86_400_000),
    readReturnChecks: int(env, 'READ_RETURN_CHECKS', 5, 1, 3_600),
    databasePoolSize,
    databaseStatementTimeoutMs: int(env, 'DATABASE_STATEMENT_TIMEOUT_MS', 30_000, 100, 3_600_000),
    embeddedPgDir: path.resolve(raw(env, 'EMBEDDED_PG_DIR') ?? path.join(installationRoot(), '.data')),
    embeddedPgPort: int(env, 'EMBEDDED_PG_PORT', 54329, 1024, 65535),
    migrationsRun: bool(env, 'MIGRATIONS_RUN', true),

    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    redisKeyPrefix: redisPrefix(env, 'REDIS_KEY_PREFIX', 'tally:'),

    keyCacheTtlMs: int(env, 'KEY_CACHE_TTL_MS', 10_000, 0, 30_000),
  };
}

function readIngestSettings(
  env: Env,
  read: {
    ingestMaxBytes: number;
    ingestMaxInflightBytes: number;
    databaseUrl: string | undefined;
    databasePoolSize: number;
  },
) {
  const { ingestMaxBytes, ingestMaxInflightBytes, databaseUrl, databasePoolSize } = read;
  // One key may hold a quarter of the budget (and at least one full body): three other apps
  // still find room while one key's uploads stall.
  const perKeyDefault = Math.max(ingestMaxBytes, Math.floor(ingestMaxInflightBytes / 4));
  return {
    ingestMaxEvents: int(env, 'INGEST_MAX_EVENTS', 1000, 1, 100_000),
    ingestMaxBytes,
    ingestMaxEventBytes: int(env, 'INGEST_MAX_EVENT_BYTES', 32_768, 256, 1_048_576),
    ingestMaxInflightBytes,
    ingestMaxInflightBytesPerKey: int(
      env,
      'INGEST_MAX_INFLIGHT_BYTES_PER_KEY',
      perKeyDefault,
      1024,
      4096 * 1_048_576,
    ),
    ingestBodyIdleMs: int(env, 'INGEST_BODY_IDLE_MS', 10_000, 100, 600_000),
    ingestBodyMinBytesPerSecond: int(env, 'INGEST_BODY_MIN_BYTES_PER_SECOND', 1024, 0, 1_073_741_824),
    ingestMaxEventAgeDays: int(env, 'INGEST_MAX_EVENT_AGE_DAYS', 7, 1, 365),
    ingestMaxErrorsListed: int(env, 'INGEST_MAX_ERRORS_LISTED', 100, 0, 100_000),
    ingestWriteConcurrency: int(
      env,
      'INGEST_WRITE_CONCURRENCY',
      // Never more than the pool holds, so that a small pool alone is no configuration error.
      Math.min(databasePoolSize, defaultWriteConcurrency(databaseUrl, availableParallelism())),
      1,
      200,
    ),
    ingestWriteMaxEvents: int(env, 'INGEST_WRITE_MAX_EVENTS', 1000, 1, 100_000),
    ingestMaxEventNamesPerDay: int(env, 'INGEST_MAX_EVENT_NAMES_PER_DAY', 2_000, 1, 1_000_000),
    piiPolicy: oneOf(env, 'PII_POLICY', PII_POLICIES, 'redact'),
  };
}

function readLimitSettings(env: Env, rateWindowMs: number) {
  return {
    rateWindowMs,
    ingestRateRequests: int(env, 'INGEST_RATE_REQUESTS', 100, 1, 10_000_000),
    ingestRateEvents: int(env, 'INGEST_RATE_EVENTS', 50_000, 1, 1_000_000_000),
    readRateRequests: int(env, 'READ_RATE_REQUESTS', 50, 1, 10_000_000),
    readStatementTimeoutMs: int(env, 'READ_STATEMENT_TIMEOUT_MS', 5_000, 1, 3_600_000),
    readMaxConcurrentPerKey: int(env, 'READ_MAX_CONCURRENT_PER_KEY', 2, 1, 10_000),
    readTimeMsPerSecond: int(env, 'READ_TIME_MS_PER_SECOND', 500, 1, 1_000_000),
    ingestCpuMsPerSecond: int(
      env,
      'INGEST_CPU_MS_PER_SECOND',
      defaultIngestCpuMsPerSecond(availableParallelism()),
      1,
      1_000_000,
    ),
    authFailureLimit: int(env, 'AUTH_FAILURE_LIMIT', 20, 1, 10_000_000),
  };
}

function readJobSettings(env: Env) {
  return {
    rollupsEnabled: bool(env, 'ROLLUPS_ENABLED', true),
    rollupIntervalSeconds: int(env, 'ROLLUP_INTERVAL_SECONDS', 60, 1, 86_400),
    rollupsMaxRows: int(env, 'ROLLUPS_MAX_ROWS', 5_000, 1, 100_000),
    breakdownMaxValues: int(env, 'BREAKDOWN_MAX_VALUES', 1_000, 1, 100_000),
    erasurePausePercent: int(env, 'ERASURE_PAUSE_PERCENT', 100, 0, 1_000),
    erasureLedgerPath: path.resolve(
      raw(env, 'ERASURE_LEDGER_PATH') ?? path.join(installationRoot(), '.data', 'erasure-ledger.ndjson'),
    ),
    eventRetentionDays: int(env, 'EVENT_RETENTION_DAYS', 90, 1, 3650),
    partitionsAheadDays: int(env, 'PARTITIONS_AHEAD_DAYS', 3, 1, 60),
    lookupSummaryIntervalMs: int(env, 'LOOKUP_SUMMARY_INTERVAL_MS', 2_000, 0, 3_600_000),
    quarantineDays: int(env, 'QUARANTINE_DAYS', 7, 1, 365),
    quarantineMaxEventsPerDay: int(env, 'QUARANTINE_MAX_EVENTS_PER_DAY', 100_000, 0, 100_000_000),

    dashboardEnabled: bool(env, 'DASHBOARD_ENABLED', true),

    exportSettleMs: int(env, 'EXPORT_SETTLE_MS', 10_000, 200, 3_600_000),
    exportChunkRows: int(env, 'EXPORT_CHUNK_ROWS', 5_000, 1, 100_000),
    exportMaxConcurrent: int(env, 'EXPORT_MAX_CONCURRENT', 2, 1, 1_000),
    exportIdleTimeoutMs: int(env, 'EXPORT_IDLE_TIMEOUT_MS', 60_000, 100, 3_600_000),
  };
}

/**
 * One key's share of an instance's ingest CPU per second: a sixteenth of the machine's cores,
 * from 100 to 250 ms, so at most a quarter of the one event loop that parses and validates
 * every app's batches. A key's turns are also spaced to that share (IngestCpuBudgets), which
 * is what bounds the delay it can add to other apps' requests: 125 ms (one eighth of the loop)
 * on 2 cores.
 */
export function defaultIngestCpuMsPerSecond(cores: number): number {
  return Math.max(100, Math.min(250, Math.round((cores * 1000) / 16)));
}

/** Reads the process environment. The only place that touches `process.env`. */
export function loadConfigFromProcess(overrides: Env = {}): AppConfig {
  return loadConfig({ ...process.env, ...overrides });
}

export const APP_CONFIG = Symbol('APP_CONFIG');
