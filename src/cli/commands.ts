import { parseArgs } from 'node:util';
import type { INestApplicationContext } from '@nestjs/common';
import { AppsService } from '@app/auth/apps.service';
import { KeysService } from '@app/auth/keys.service';
import { RollupsService } from '@app/rollups/rollups.service';

/** A mistake in the command line: one line on stderr and exit code 2. */
export class UsageError extends Error {}

export interface CommandResult {
  /** The one JSON document printed with --json. */
  json: unknown;
  /** What a person reads without --json. */
  text: string;
}

export interface Command {
  /** Words that select it, e.g. ['keys', 'create-api']. */
  path: string[];
  usage: string;
  /** False for commands that do their own database work (migrate). */
  needsServices: boolean;
  parse(args: string[]): Record<string, unknown>;
  run(ctx: INestApplicationContext | null, options: Record<string, unknown>): Promise<CommandResult>;
}

const DATE = /^\d{4}-\d{2}-\d{2}$/;

type Flags = Record<string, { type: 'string' | 'boolean'; multiple?: boolean }>;
type Values = Record<string, string | string[] | boolean | undefined>;

function parse(args: string[], options: Flags, positionals = 0): { values: Values; positionals: string[] } {
  let parsed: { values: Values; positionals: string[] };
  try {
    parsed = parseArgs({
      args,
      options: { ...options, json: { type: 'boolean' } },
      allowPositionals: positionals > 0,
      strict: true,
    }) as { values: Values; positionals: string[] };
  } catch (err) {
    throw new UsageError((err as Error).message.split('\n')[0]);
  }
  if (parsed.positionals.length !== positionals) {
    throw new UsageError(`expected ${positionals} argument(s), got ${parsed.positionals.length}`);
  }
  return parsed;
}

function required(value: unknown, flag: string): string {
  if (typeof value !== 'string' || value.trim() === '') throw new UsageError(`${flag} is required`);
  return value;
}

function realDate(value: unknown, flag: string): string | undefined {
  if (value === undefined) return undefined;
  const s = String(value);
  const d = new Date(`${s}T00:00:00Z`);
  if (!DATE.test(s) || Number.isNaN(d.getTime()) || d.toISOString().slice(0, 10) !== s) {
    throw new UsageError(`${flag} must be a real date YYYY-MM-DD, got "${s}"`);
  }
  return s;
}

function table(rows: Record<string, unknown>[], columns: string[]): string {
  if (rows.length === 0) return '(none)';
  const cells = rows.map((r) =>
    columns.map((c) => (Array.isArray(r[c]) ? (r[c] as unknown[]).join(',') : String(r[c] ?? '-'))),
  );
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i].length)));
  const line = (values: string[]) =>
    values
      .map((v, i) => v.padEnd(widths[i]))
      .join('  ')
      .trimEnd();
  return [line(columns), ...cells.map(line)].join('\n');
}

export const COMMANDS: Command[] = [
  {
    path: ['apps', 'create'],
    usage: 'apps create --name <name>',
    needsServices: true,
    parse: (args) => ({ name: required(parse(args, { name: { type: 'string' } }).values.name, '--name') }),
    async run(ctx, o) {
      const app = await ctx!.get(AppsService).create(o.name as string);
      return { json: app, text: `Created app ${app.name}\nid: ${app.id}` };
    },
  },
  {
    path: ['apps', 'list'],
    usage: 'apps list',
    needsServices: true,
    parse: (args) => (parse(args, {}), {}),
    async run(ctx) {
      const apps = await ctx!.get(AppsService).list();
      return {
        json: apps,
        text: table(apps as unknown as Record<string, unknown>[], ['id', 'name', 'createdAt']),
      };
    },
  },
  {
    path: ['keys', 'create-ingest'],
    usage: 'keys create-ingest --app <appId> [--mode live|test] [--name <label>]',
    needsServices: true,
    parse(args) {
      const { values } = parse(args, {
        app: { type: 'string' },
        mode: { type: 'string' },
        name: { type: 'string' },
      });
      const mode = (values.mode as string | undefined) ?? 'live';
      if (mode !== 'live' && mode !== 'test')
        throw new UsageError(`--mode must be live or test, got "${mode}"`);
      return { app: required(values.app, '--app'), mode, name: values.name ?? null };
    },
    async run(ctx, o) {
      const key = await ctx!
        .get(KeysService)
        .createIngestKey(o.app as string, o.mode as 'live' | 'test', o.name as string | null);
      return {
        json: key,
        text: `Ingest key (${key.mode}) for app ${key.appId}, id ${key.id}.\nStore it now; it is not shown again:\n${key.key}`,
      };
    },
  },
  {
    path: ['keys', 'create-api'],
    usage:
      'keys create-api --app <appId> [--app <appId>…] --scope <scope> [--scope <scope>…] [--expires-in-days <n>] [--name <label>]',
    needsServices: true,
    parse(args) {
      const { values } = parse(args, {
        app: { type: 'string', multiple: true },
        scope: { type: 'string', multiple: true },
        'expires-in-days': { type: 'string' },
        name: { type: 'string' },
      });
      const apps = values.app as string[] | undefined;
      const scopes = values.scope as string[] | undefined;
      if (!apps?.length) throw new UsageError('--app is required');
      if (!scopes?.length) throw new UsageError('--scope is required');
      let expiresInDays: number | null = null;
      const raw = values['expires-in-days'] as string | undefined;
      if (raw !== undefined) {
        if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 3650) {
          throw new UsageError(`--expires-in-days must be a whole number from 1 to 3650, got "${raw}"`);
        }
        expiresInDays = Number(raw);
      }
      return { apps, scopes, expiresInDays, name: values.name ?? null };
    },
    async run(ctx, o) {
      const key = await ctx!
        .get(KeysService)
        .createApiKey(
          o.apps as string[],
          o.scopes as string[],
          o.expiresInDays as number | null,
          o.name as string | null,
        );
      return {
        json: key,
        text: `API key ${key.id} for ${key.appIds.join(', ')} with ${key.scopes.join(', ')}${key.expiresAt ? `, expires ${key.expiresAt}` : ''}.\nStore it now; it is not shown again:\n${key.key}`,
      };
    },
  },
  {
    path: ['keys', 'list'],
    usage: 'keys list [--app <appId>]',
    needsServices: true,
    parse: (args) => ({ app: parse(args, { app: { type: 'string' } }).values.app }),
    async run(ctx, o) {
      const keys = await ctx!.get(KeysService).list(o.app as string | undefined);
      return {
        json: keys,
        text: table(keys as unknown as Record<string, unknown>[], [
          'id',
          'mask',
          'kind',
          'appIds',
          'scopes',
          'createdAt',
          'lastUsedAt',
          'expiresAt',
          'revokedAt',
        ]),
      };
    },
  },
  {
    path: ['keys', 'revoke'],
    usage: 'keys revoke <keyId>',
    needsServices: true,
    parse: (args) => ({ id: parse(args, {}, 1).positionals[0] }),
    async run(ctx, o) {
      const result = await ctx!.get(KeysService).revoke(o.id as string);
      return {
        json: result,
        text: `Revoked key ${result.id} at ${result.revokedAt}. Every instance refuses it within 30 s.`,
      };
    },
  },
  {
    path: ['seed'],
    usage: 'seed',
    needsServices: true,
    parse: (args) => (parse(args, {}), {}),
    async run(ctx) {
      const apps = ctx!.get(AppsService);
      const keys = ctx!.get(KeysService);
      const app = await apps.create('Demo app');
      const live = await keys.createIngestKey(app.id, 'live', 'demo live');
      const test = await keys.createIngestKey(app.id, 'test', 'demo test');
      const api = await keys.createApiKey([app.id], ['events:read', 'rollups:read'], null, 'demo read');
      const json = { app, ingestKeys: { live: live.key, test: test.key }, apiKey: api.key };
      return {
        json,
        text: [
          `Demo app ${app.id}`,
          `live ingest key: ${live.key}`,
          `test ingest key: ${test.key}`,
          `API key:         ${api.key}`,
        ].join('\n'),
      };
    },
  },
  {
    path: ['rollups', 'compute'],
    usage: 'rollups compute [--app <appId>] [--from <YYYY-MM-DD>] [--to <YYYY-MM-DD>]',
    needsServices: true,
    parse(args) {
      const { values } = parse(args, {
        app: { type: 'string' },
        from: { type: 'string' },
        to: { type: 'string' },
      });
      const from = realDate(values.from, '--from');
      const to = realDate(values.to, '--to');
      if (from && to && from > to) throw new UsageError('--from must not be after --to');
      return { appId: values.app, from, to };
    },
    async run(ctx, o) {
      const result = await ctx!
        .get(RollupsService)
        .compute(o as { appId?: string; from?: string; to?: string });
      return {
        json: { days: result.days, rows: result.rows },
        text: `Computed ${result.rows} rollup rows over ${result.days} app-days.`,
      };
    },
  },
  {
    path: ['migrate'],
    usage: 'migrate',
    needsServices: false,
    parse: (args) => (parse(args, {}), {}),
    // The work happens while the CLI prepares the database; see main.ts.
    async run(_ctx, o) {
      const applied = (o.applied as string[]) ?? [];
      return {
        json: { applied },
        text: applied.length
          ? `Applied ${applied.length} migration(s):\n${applied.join('\n')}`
          : 'The schema is up to date.',
      };
    },
  },
];

export function usage(): string {
  return [
    'Usage: tally <command> [options] [--json]',
    '',
    'Commands:',
    ...COMMANDS.map((c) => `  ${c.usage}`),
  ].join('\n');
}

/** Finds the command named by the first words of argv; returns it and the remaining args. */
export function findCommand(argv: string[]): { command: Command; rest: string[] } {
  for (const command of COMMANDS) {
    if (command.path.every((word, i) => argv[i] === word))
      return { command, rest: argv.slice(command.path.length) };
  }
  const words = argv
    .filter((a) => !a.startsWith('-'))
    .slice(0, 2)
    .join(' ');
  throw new UsageError(words ? `unknown command "${words}" (see --help)` : 'no command given (see --help)');
}
