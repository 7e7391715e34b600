import type { DataSource } from 'typeorm';
import { AuditRepository } from '@app/audit/audit.repository';
import { AuditService } from '@app/audit/audit.service';
import { AppEntity } from '@app/auth/app.entity';
import { AppRepository } from '@app/auth/app.repository';
import { AppsService } from '@app/auth/apps.service';
import { KeyEntity } from '@app/auth/key.entity';
import { KeyRepository } from '@app/auth/key.repository';
import { KeysService } from '@app/auth/keys.service';
import { KeyVerifier } from '@app/auth/key-verifier';
import type { AppConfig } from '@app/config/config';
import { createDataSource } from '@app/database/data-source';
import { runMigrations } from '@app/database/migrate';
import { prepareDatabase } from '@app/database/prepare';
import type { RollupsService } from '@app/rollups/rollups.service';
import type { CliPrivacy } from '@app/privacy/privacy.cli';
import type { ExportService } from '@app/export/export.service';
import type { PlanServices } from './plan-services';
import { DimensionRepository } from '@app/insights/dimension.repository';
import { DimensionsService } from '@app/insights/dimensions.service';

/**
 * The services the admin commands call, built by hand on one DataSource. The CLI does not boot
 * Nest: the services and repositories are plain classes, and the framework would cost more time
 * than the command itself.
 */
export interface CliServices {
  audit: AuditService;
  apps: AppsService;
  keys: KeysService;
  /** The payload keys apps declare as breakdown dimensions. */
  dimensions: DimensionsService;
  /** Built on first use: the rollups code is the one part that needs Nest's common layer. */
  rollups(): RollupsService;
  /** Built on first use: deletions and suppressions (they run through the rollups). */
  privacy(): CliPrivacy;
  /** Built on first use, like rollups. The CLI's export reads the database directly. */
  exports(): ExportService;
  /** Built on first use: tracking plans, their dry run and the quarantine. */
  plans(): PlanServices;
  /** The database the CLI uses, as a person reads it (never a password). */
  database: string;
  /** The newest migration applied (its timestamp), or null on an empty database. */
  schemaVersion(): Promise<number | null>;
  close(): Promise<void>;
}

/** A database URL without its password, or the embedded cluster's folder. */
function describeDatabase(config: AppConfig): string {
  if (!config.databaseUrl) return `embedded PostgreSQL in ${config.embeddedPgDir}`;
  const url = new URL(config.databaseUrl);
  url.password = '';
  return url.toString();
}

const POOL_SIZE = 2;

export async function openServices(config: AppConfig): Promise<CliServices> {
  const database = await prepareDatabase(config, { migrate: false, createCluster: false });
  const resolved = database.config;
  const dataSource = createDataSource({
    url: resolved.databaseUrl!,
    poolSize: POOL_SIZE,
    statementTimeoutMs: resolved.databaseStatementTimeoutMs,
    applicationName: 'tally-cli',
    entities: [AppEntity, KeyEntity],
  });
  const close = async () => {
    if (dataSource.isInitialized) await dataSource.destroy().catch(() => undefined);
    await database.release().catch(() => undefined);
  };
  try {
    await dataSource.initialize();
    if (resolved.migrationsRun) await runMigrations(dataSource);
  } catch (err) {
    await close();
    throw err;
  }
  const audit = new AuditService(new AuditRepository(dataSource));
  const apps = new AppsService(new AppRepository(dataSource), audit);
  const keyRepository = new KeyRepository(dataSource);
  const keys = new KeysService(keyRepository, apps, new KeyVerifier(keyRepository, apps, resolved), audit);
  let rollups: RollupsService | undefined;
  let privacy: CliPrivacy | undefined;
  let exports: ExportService | undefined;
  let plans: PlanServices | undefined;
  return {
    audit,
    apps,
    keys,
    dimensions: new DimensionsService(new DimensionRepository(dataSource), audit, resolved),
    rollups: () => (rollups ??= buildRollups(dataSource, resolved, audit)),
    privacy: () => {
      const { buildCliPrivacy } =
        require('../privacy/privacy.cli') as typeof import('../privacy/privacy.cli');
      return (privacy ??= buildCliPrivacy(
        dataSource,
        apps,
        keys,
        audit,
        (rollups ??= buildRollups(dataSource, resolved, audit)),
        resolved.erasurePausePercent,
        resolved.erasureLedgerPath,
      ));
    },
    exports: () => (exports ??= buildExports(dataSource, resolved)),
    database: describeDatabase(config),
    schemaVersion: async () => {
      const [row] = (await dataSource.query(`SELECT max("timestamp")::float8 AS v FROM migrations`)) as {
        v: number | null;
      }[];
      return row.v;
    },
    plans: () => {
      const { buildPlanServices } = require('./plan-services') as typeof import('./plan-services');
      return (plans ??= buildPlanServices(dataSource, resolved, apps, audit));
    },
    close,
  };
}

/** The rollups and export code load on first use: most commands need neither. */
function buildRollups(dataSource: DataSource, config: AppConfig, audit: AuditService): RollupsService {
  const built = require('./rollup-services') as typeof import('./rollup-services');
  return built.buildRollups(dataSource, config, audit);
}

function buildExports(dataSource: DataSource, config: AppConfig): ExportService {
  const built = require('./export-services') as typeof import('./export-services');
  return built.buildExports(dataSource, config);
}

/** Attaches to the database, applies the pending migrations and leaves; returns their names. */
export async function migrate(config: AppConfig): Promise<string[]> {
  const database = await prepareDatabase(config, { migrate: true, createCluster: false });
  await database.release();
  return database.migrationsApplied;
}
