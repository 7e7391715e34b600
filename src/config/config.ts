import { ConfigError, type Parser } from './parsers';
import { Derived, type Setting, type SettingValue } from './setting';
import { SETTINGS } from './settings';

export { ConfigError } from './parsers';
export { installationRoot } from './installation';
export {
  PII_POLICIES,
  type PiiPolicy,
  defaultIngestCpuMsPerSecond,
  defaultWriteConcurrency,
} from './settings';

/**
 * The whole runtime configuration: one property per row of SETTINGS (src/config/settings.ts),
 * typed by its parser. It is read from the environment once, at boot, by `loadConfig`; nothing
 * else in the code base reads `process.env`.
 */
export type AppConfig = { -readonly [K in keyof typeof SETTINGS]: SettingValue<(typeof SETTINGS)[K]> };

/**
 * The part of the configuration a class reads: constructors take `@Inject(APP_CONFIG)` typed as
 * `ConfigSlice<'a' | 'b'>`, so that each says which settings it depends on.
 */
export type ConfigSlice<K extends keyof AppConfig> = Readonly<Pick<AppConfig, K>>;

type Env = Record<string, string | undefined>;

function raw(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

function readSetting(env: Env, setting: Setting<unknown>, read: Record<string, unknown>): unknown {
  const value = raw(env, setting.env);
  if (value !== undefined) return (setting.parse as Parser<unknown>)(value, setting.env);
  const fallback = setting.default;
  if (!(fallback instanceof Derived)) return fallback;
  const missing = fallback.uses.find((key) => !(key in read));
  // A programming error in the table, not a bad environment.
  if (missing !== undefined)
    throw new Error(`${setting.env}'s default uses ${missing}, which must come earlier`);
  return fallback.compute(read);
}

/**
 * Relations between settings, checked once each has been read on its own. Each names the
 * variable to change, with the message it gets.
 */
const CHECKS: ((config: AppConfig) => ConfigError | undefined)[] = [
  // Partitions must outlive the oldest event ingest still accepts, or an insert would miss them.
  (c) =>
    c.eventRetentionDays <= c.ingestMaxEventAgeDays
      ? new ConfigError(
          'EVENT_RETENTION_DAYS',
          `must be greater than INGEST_MAX_EVENT_AGE_DAYS (${c.ingestMaxEventAgeDays}), got ${c.eventRetentionDays}`,
        )
      : undefined,
  // A body the budget could never hold would be refused forever.
  (c) =>
    c.ingestMaxInflightBytes < c.ingestMaxBytes
      ? new ConfigError(
          'INGEST_MAX_INFLIGHT_BYTES',
          `must be at least INGEST_MAX_BYTES (${c.ingestMaxBytes}), got ${c.ingestMaxInflightBytes}`,
        )
      : undefined,
  (c) =>
    c.ingestMaxInflightBytesPerKey < c.ingestMaxBytes
      ? new ConfigError(
          'INGEST_MAX_INFLIGHT_BYTES_PER_KEY',
          `must be at least INGEST_MAX_BYTES (${c.ingestMaxBytes}), got ${c.ingestMaxInflightBytesPerKey}`,
        )
      : undefined,
  (c) =>
    c.ingestMaxInflightBytesPerKey > c.ingestMaxInflightBytes
      ? new ConfigError(
          'INGEST_MAX_INFLIGHT_BYTES_PER_KEY',
          `must not exceed INGEST_MAX_INFLIGHT_BYTES (${c.ingestMaxInflightBytes}), got ${c.ingestMaxInflightBytesPerKey}`,
        )
      : undefined,
  // Each running ingest statement holds a pooled connection; the rest serve reads and checks.
  (c) =>
    c.ingestWriteConcurrency > c.databasePoolSize
      ? new ConfigError(
          'INGEST_WRITE_CONCURRENCY',
          `must not exceed DATABASE_POOL_SIZE (${c.databasePoolSize}), got ${c.ingestWriteConcurrency}`,
        )
      : undefined,
];

/**
 * Builds and validates the configuration from an environment map, reading SETTINGS top to
 * bottom, then CHECKS. Throws the ConfigError of the first bad variable.
 */
export function loadConfig(env: Env): AppConfig {
  const read: Record<string, unknown> = {};
  for (const [key, setting] of Object.entries(SETTINGS) as [string, Setting<unknown>][]) {
    read[key] = readSetting(env, setting, read);
  }
  const config = read as AppConfig;
  for (const check of CHECKS) {
    const error = check(config);
    if (error) throw error;
  }
  return config;
}

/** Reads the process environment. The only place that touches `process.env`. */
export function loadConfigFromProcess(overrides: Env = {}): AppConfig {
  return loadConfig({ ...process.env, ...overrides });
}

export const APP_CONFIG = Symbol('APP_CONFIG');
