/**
 * Every PostgreSQL advisory lock the service takes, in one place, so that no two share an id.
 * The values are part of the operational surface (an operator or a test may hold one to pause
 * that work), so they do not change.
 */
export const ADVISORY_LOCKS = {
  /** Applying migrations (src/database/migrate.ts). */
  migrations: 7_310_001,
  /** The rollup computation (src/rollups). */
  rollups: 7_310_002,
  /** Building and dropping the filter indexes of the daily partitions (src/storage). */
  partitionIndexes: 7_310_003,
  /**
   * Running one deletion (src/privacy): the two-key form `(deletions, hashtext(deletionId))`,
   * so that each deletion has a lock of its own.
   */
  deletions: 7_310_004,
} as const;
