import { DynamicModule, INestApplicationContext, Module, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DataSource } from 'typeorm';
import { AuditModule } from '@app/audit/audit.module';
import { AuditService } from '@app/audit/audit.service';
import { AuthCoreModule } from '@app/auth/auth-core.module';
import { AppsService } from '@app/auth/apps.service';
import { KeysService } from '@app/auth/keys.service';
import type { AppConfig } from '@app/config/config';
import { ConfigModule } from '@app/config/config.module';
import { DatabaseModule } from '@app/database/database.module';
import { runMigrations } from '@app/database/migrate';
import { prepareDatabase } from '@app/database/prepare';
import type { RollupsService } from '@app/rollups/rollups.service';
import type { CliPrivacy } from '@app/privacy/privacy.cli';
import type { ExportService } from '@app/export/export.service';
import type { PlanServices } from './plan-services';
import type { DimensionsService } from '@app/insights/dimensions.service';

/**
 * The command groups whose services live beyond apps, keys and the audit log. A command names
 * the groups it uses (`rt.services('rollups')`), and its context holds their modules only.
 */
export type CliGroup = 'rollups' | 'privacy' | 'export' | 'plans' | 'insights';

/**
 * Each group's modules: the service's own core modules (no HTTP, no schedules, no listeners),
 * required only when a command opens the group.
 */
const GROUPS: Record<CliGroup, () => { modules: (Type | DynamicModule)[]; config?: Partial<AppConfig> }> = {
  // Insights is a step of the rollup computation, as in the server: every group that computes
  // rollups (a compute, an erasure, a zone change) loads it.
  rollups: () => ({ modules: [rollupsCore(), insightsCore()] }),
  privacy: () => ({
    modules: [
      (require('../privacy/privacy.cli') as typeof import('../privacy/privacy.cli')).PrivacyCliModule,
      insightsCore(),
    ],
  }),
  insights: () => ({ modules: [rollupsCore(), insightsCore()] }),
  export: () => ({
    modules: [
      (require('../export/export-core.module') as typeof import('../export/export-core.module'))
        .ExportCoreModule,
    ],
  }),
  plans: () => (require('./plan-services') as typeof import('./plan-services')).PLANS_GROUP,
};

function rollupsCore(): Type {
  return (require('../rollups/rollups-core.module') as typeof import('../rollups/rollups-core.module'))
    .RollupsCoreModule;
}

function insightsCore(): Type {
  return (require('../insights/insights-core.module') as typeof import('../insights/insights-core.module'))
    .InsightsCoreModule;
}

/** The services the admin commands call, from a Nest application context of the service's modules. */
export interface CliServices {
  audit: AuditService;
  apps: AppsService;
  keys: KeysService;
  /** The services of a group the command opened (see CliGroup); any other throws. */
  rollups(): RollupsService;
  /** Deletions and suppressions, and running a deletion here (`--wait`). */
  privacy(): CliPrivacy;
  /** The export; the CLI reads the primary. */
  exports(): ExportService;
  /** Tracking plans, their dry run and the quarantine. */
  plans(): PlanServices;
  /** The payload keys apps declare as breakdown dimensions (group `insights`). */
  dimensions(): DimensionsService;
  /** Any provider of the context's modules. */
  get<T>(token: Type<T> | string | symbol): T;
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

/** The root of a command's context: the configuration, the database, the audit log, apps and keys. */
@Module({})
class CliModule {
  static forRoot(config: AppConfig, modules: (Type | DynamicModule)[]): DynamicModule {
    return {
      module: CliModule,
      imports: [
        ConfigModule.forRoot(config),
        DatabaseModule.forCli(config),
        AuditModule,
        AuthCoreModule,
        ...modules,
      ],
    };
  }
}

/** What a command's context is built with: the groups' modules, and their configuration. */
function contextOf(config: AppConfig, groups: CliGroup[]) {
  const opened = groups.map((g) => GROUPS[g]());
  // The CLI counts no requests: its rate-limit store (ingest's dry run holds one) stays in memory.
  let resolved: AppConfig = { ...config, redisUrl: undefined };
  for (const g of opened) resolved = { ...resolved, ...g.config };
  return CliModule.forRoot(
    resolved,
    opened.flatMap((g) => g.modules),
  );
}

/**
 * Attaches to the database (applying pending migrations unless MIGRATIONS_RUN=false) and builds
 * the context of apps, keys, the audit log and the named groups.
 */
export async function openServices(config: AppConfig, groups: CliGroup[] = []): Promise<CliServices> {
  const database = await prepareDatabase(config, { migrate: false, createCluster: false });
  let context: INestApplicationContext | undefined;
  const close = async () => {
    await context?.close().catch(() => undefined);
    await database.release().catch(() => undefined);
  };
  try {
    // Nest's logger writes to stdout, which belongs to the command's output; errors are thrown.
    context = await NestFactory.createApplicationContext(contextOf(database.config, groups), {
      logger: false,
      abortOnError: false,
    });
    if (database.config.migrationsRun) await runMigrations(context.get(DataSource));
  } catch (err) {
    await close();
    throw err;
  }
  const ctx = context;
  const get = <T>(token: Type<T> | string | symbol): T => ctx.get<T>(token as Type<T>, { strict: false });
  return {
    audit: get(AuditService),
    apps: get(AppsService),
    keys: get(KeysService),
    rollups: () =>
      get(
        (require('../rollups/rollups.service') as typeof import('../rollups/rollups.service')).RollupsService,
      ),
    privacy: () =>
      get((require('../privacy/privacy.cli') as typeof import('../privacy/privacy.cli')).CliPrivacy),
    exports: () =>
      get((require('../export/export.service') as typeof import('../export/export.service')).ExportService),
    plans: () => (require('./plan-services') as typeof import('./plan-services')).planServices(get),
    dimensions: () =>
      get(
        (require('../insights/dimensions.service') as typeof import('../insights/dimensions.service'))
          .DimensionsService,
      ),
    get,
    database: describeDatabase(config),
    schemaVersion: async () => {
      const [row] = (await ctx
        .get(DataSource)
        .query(`SELECT max("timestamp")::float8 AS v FROM migrations`)) as {
        v: number | null;
      }[];
      return row.v;
    },
    close,
  };
}

/** Attaches to the database, applies the pending migrations and leaves; returns their names. */
export async function migrate(config: AppConfig): Promise<string[]> {
  const database = await prepareDatabase(config, { migrate: true, createCluster: false });
  await database.release();
  return database.migrationsApplied;
}
